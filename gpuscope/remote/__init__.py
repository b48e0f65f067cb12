"""Remote hosts: the window and the CLI drive gpuscope on another machine over one SSH connection
(docs/REMOTE.md). The workstation side (ssh transport, connection, the client core) and the agent
that runs on the remote host live here; both reach the core through :mod:`gpuscope.api`."""
