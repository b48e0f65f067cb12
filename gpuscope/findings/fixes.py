"""What a structured fix changes in the next run's launch fields, and its short label.

The launch panel's "Apply fix" takes a :class:`~gpuscope.fix.Fix`, which every rule makes
itself where it decides (no fix text is read back into an action).
"""

from __future__ import annotations

from gpuscope.fix import (CleanupPids, CleanupShm, Fix, SetForkserverPreload, SetNsysForkTracing,
                          SetStartMethod, StopRun)


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
