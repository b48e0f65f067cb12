"""Rules on the run's summary: how its first process ended, what it left running, nsys's diagnostics.

They read the run's record (``summary.json``, written when the run ends), so they run on a
finished run (``gpuscope findings``, the app's past runs), not in the live recorder's last step.
"""

from __future__ import annotations

from gpuscope.finding import Finding, Severity, evidence, replace
from gpuscope.findings.registry import Input, OnStop, Phase, RunInputs, declare, rule


@rule("first-process-died", codes=("died-by-signal",), inputs={Input.SUMMARY, Input.EVENTS},
      title="the program's first process died by a signal (not a Stop)", on_stop=OnStop.KEEP,
      applies=lambda run: run.record is not None and bool(run.record.exit.signal))
def root_signal(run: RunInputs) -> list[Finding]:
    """The program's first process itself died by a signal (not a Stop)."""
    sig = run.record.exit.signal if run.record is not None else None
    if not sig or run.stopped or sig in ("SIGTERM", "SIGINT"):
        return []
    root = next((p for p, r in run.roles.items() if r in ("main", "torchrun agent")), None)
    return [Finding("died-by-signal", f"the program's first process died by {sig}",
                    "SIGKILL often means the OOM killer (see `dmesg`); SIGSEGV a crash in native code",
                    Severity.ERROR, (root,) if root else (), evidence({}, [f"exit: {sig}"], [root] if root else []))]


@rule("left-running", inputs={Input.SUMMARY, Input.PROCS}, title="processes of the run still running after it ended",
      applies=lambda run: run.record is not None and bool(run.record.left_running))
def left_running(run: RunInputs) -> list[Finding]:
    """Processes alive after the run ended by itself that are still alive now (a resource tracker
    finishing its clean-up a moment later is no finding)."""
    from gpuscope.procs.membership import has_run_tag
    from gpuscope.procs.read import alive

    record = run.record
    if record is None:
        return []
    pids = tuple(sorted(p for p in record.left_running if alive(p) and has_run_tag(p, record.run_id)))
    if not pids:
        return []
    from gpuscope.fix import CleanupPids   # loaded with the finding that offers it, not with every run's rules
    return [Finding("left-running", f"{len(pids)} process(es) of the run were still running after it ended",
                    "stop them (Cleanup tab, or `gpuscope cleanup`); a daemon thread or a detached child "
                    "usually keeps them", Severity.WARNING, pids, evidence({"processes": len(pids)}, (), pids),
                    CleanupPids(pids))]


NSYS_CODES = ("nvtx-incompatible", "nvtx-domain-only", "nvtx-discarded-handles", "nvtx-none-collected",
              "nothing-recorded")


@rule("nsys-diagnostics", inputs={Input.NSYS, Input.SUMMARY}, codes=NSYS_CODES,
      title="nsys's own diagnostics: NVTX rejected, discarded or not collected",
      applies=lambda run: bool(run.record and run.record.nsys and run.record.nsys.findings))
def nsys_findings(run: RunInputs) -> list[Finding]:
    """The findings nsys's diagnostics (nsys/diagnostics.py) saved with the run's record."""
    nsys = run.record.nsys if run.record is not None else None
    return [replace(f, source="nsys") for f in nsys.findings] if nsys is not None else []


# decided by the report's coverage (trace/coverage.py: coverage_findings; numpy, so not imported here)
declare("nsys-missed-ranges", inputs={Input.NSYS, Input.EVENTS}, phase=Phase.AFTER,
        title="nsys kept fewer ranges of a process than gpuscope recorded (the report's coverage)",
        module="gpuscope.trace.coverage")
