"""Shared memory a run left behind: segments and named semaphores its processes created, never
unlinked, and still in /dev/shm when the run ended (the ``D`` lines of inject/shmwatch.py)."""

from __future__ import annotations

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.findings.registry import Input, RunInputs, rule


@rule("shm-left-behind", codes=("leaked-shm",), inputs=(Input.EVENTS, Input.PROCS),
      applies=lambda run: any(getattr(pe, "shm", None) for pe in run.events),
      title="shared memory created by the run and still in /dev/shm at its end")
def shm_left_behind(run: RunInputs) -> list[Finding]:
    from gpuscope.procs.shm import left_by, still_present   # the /dev/shm reader: only for runs that made some

    left = still_present(left_by(run.events))
    if not left:
        return []
    segments = [m for m in left if m.kind == "shm"]
    total = sum(m.size or 0 for m in segments)
    first = left[0]
    more = f" and {len(left) - 1} more" if len(left) > 1 else ""
    from gpuscope.fix import CleanupShm   # loaded with the finding that offers it, not with every run's rules
    return [Finding(
        "leaked-shm",
        f"{first.describe()}, was never unlinked and is still in /dev/shm{more}: it holds RAM until "
        "someone removes it (`gpuscope cleanup` lists it with this run)",
        "call unlink() once in the creating process when the segment is no longer needed (close() in "
        "every process that attached), e.g. in a try/finally, or use SharedMemoryManager, which does both; "
        "and leave the resource tracker its registration (it unlinks what a crash leaves)",
        Severity.WARNING, tuple(sorted({m.pid for m in left})),
        evidence({"segments": len(segments), "bytes": total, "semaphores": len(left) - len(segments)},
                 [m.describe() for m in left[:16]], [m.pid for m in left]),
        CleanupShm(tuple(m.name for m in segments)) if segments else None)]
