"""Findings: rules that read what a run recorded and say what is wrong, with evidence and a fix."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Evidence", "FIX_TYPES", "Finding", "Severity"]   # Fix: a name for type checkers (gpuscope.finding)


def __getattr__(name: str) -> Any:
    """The findings model (``gpuscope.finding``) on first use: ``gpuscope run`` imports this
    package before it starts the program and needs the model only after."""
    if name in __all__:
        from gpuscope import finding

        return getattr(finding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
