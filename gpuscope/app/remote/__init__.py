"""A remote host in the window (docs/REMOTE.md, "App"): the core handle every view calls through,
File → Connect to host…, the recent hosts, and the host the window shows."""
