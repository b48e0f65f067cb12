"""Telemetry samples in the run store (owned by gpuscope.telemetry)."""

DDL = ""
