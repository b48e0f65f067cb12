"""Attach to a Python process tree gpuscope did not start (docs/ATTACH.md)."""
