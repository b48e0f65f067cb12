"""What a structured fix changes in the next run's launch fields, and the fixes of known fix texts.

The launch panel's "Apply fix" takes a :class:`~gpuscope.finding.Fix`; fix texts that
other parts still pass as plain strings (the report view's coverage banner) are looked up here by
identity with the constants that produce them, so rewording a text keeps its action.
"""

from __future__ import annotations

from gpuscope.finding import (CleanupPids, CleanupShm, SetForkserverPreload, SetNsysForkTracing, SetStartMethod,
                              StopRun)

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from gpuscope.finding import Fix


def launch_changes(fix: Fix | None) -> dict[str, str]:
    """Launch-panel field changes for a structured fix; ``{}`` when it is not about the next run."""
    if isinstance(fix, SetStartMethod):
        return {"start_method": fix.method}
    if isinstance(fix, SetNsysForkTracing):
        return {"nsys": "on", "nsys_fork": "on"} if fix.on else {"nsys_fork": "off"}
    if isinstance(fix, SetForkserverPreload):
        return {"start_method": "forkserver", "forkserver_preload": ",".join(fix.modules)}
    return {}


def describe(fix: Fix | None) -> str:
    """A short label for a button or a line: "start method → spawn"."""
    if isinstance(fix, SetStartMethod):
        return f"start method → {fix.method}"
    if isinstance(fix, SetNsysForkTracing):
        return f"nsys fork tracing → {'on' if fix.on else 'off'}"
    if isinstance(fix, SetForkserverPreload):
        return f"forkserver, preloading {', '.join(fix.modules)}"
    if isinstance(fix, CleanupPids):
        return f"clean up {len(fix.pids)} process(es)"
    if isinstance(fix, CleanupShm):
        return f"unlink {len(fix.names)} shared-memory segment(s)"
    if isinstance(fix, StopRun):
        return "stop the run"
    return ""


def known_text_fixes() -> dict[str, Fix | None]:
    """The structured fix of every fix text gpuscope itself writes (coverage and nsys diagnostics)."""
    from gpuscope.nsys import diagnostics as D
    from gpuscope.trace import coverage as C

    return {
        C.FIX_FORK: SetNsysForkTracing(True),       # keeps the start method: the least invasive
        C.FIX_FORK_HANDLES: SetStartMethod("spawn"),
        C.FIX_FLUSH: None,                           # a code change
        C.FIX_NVTX: None,                            # a version pin
        D.ADVICE_DISCARDED: SetNsysForkTracing(True),
        D.ADVICE_NONE_COLLECTED: SetNsysForkTracing(True),
    }


def fix_for_text(text: str) -> tuple[bool, Fix | None]:
    """(known, fix) for a fix text gpuscope wrote; (False, None) for text it does not know."""
    table = known_text_fixes()
    if text in table:
        return True, table[text]
    return False, None
