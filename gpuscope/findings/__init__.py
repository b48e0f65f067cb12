"""Findings: rules that read what a run recorded and say what is wrong, with evidence and a fix."""

from gpuscope.finding import Evidence, Finding, Fix, Severity

__all__ = ["Evidence", "Finding", "Fix", "Severity"]
