"""Cleanup actions in the run store (owned by gpuscope.cleanup)."""

DDL = ""
