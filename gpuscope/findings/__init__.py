"""Findings: rules that read what a run recorded and say what is wrong, with evidence and a fix.

The model is :mod:`gpuscope.finding`; the rules are declared in :mod:`gpuscope.findings.registry`.
"""

from __future__ import annotations

from gpuscope.finding import Evidence, Finding, Severity

__all__ = ["Evidence", "Finding", "Severity"]
