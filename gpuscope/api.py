"""The stable calls the front ends (the desktop app, the CLI) use to reach the core.

Plain data in, plain records out; no Qt, no widget callbacks. What a running run streams (output,
telemetry batches, findings, progress lines) goes into a :class:`RunStream`, a set of bounded
queues the caller drains at its own pace; the same calls can later travel over a channel to a
remote agent. Each function imports what it calls when called, so the app's window opens without
the report reader, the store or cleanup loaded. Other parts may add a function here in a small
hunk (say so on the board).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope.runs.recorder import BaseRecorder
from gpuscope.views.run_stream import RunStream

if TYPE_CHECKING:
    from gpuscope.analysis.comparison import Comparison
    from gpuscope.cleanup.model import ActionResult, Suspect
    from gpuscope.cleanup.scanner import Scanner
    from gpuscope.finding import Finding
    from gpuscope.findings.stacks import ProcessStacks
    from gpuscope.nsys.report import Report
    from gpuscope.runs.recorder import RunContext
    from gpuscope.runs.supervisor import Run
    from gpuscope.spec import RunSpec
    from gpuscope.telemetry.batch import SampleBatch
    from gpuscope.telemetry.ray_store import StoreTail
    from gpuscope.views.history import HistoryData
    from gpuscope.views.past_run import PastRun

__all__ = ["RunStream", "cleanup_apply", "cleanup_scanner", "compare_runs", "compare_series",
           "delete_runs", "findings", "gpu_unavailable_reason", "history", "live_findings", "latest_stacks",
           "load_report", "main_exited", "open_past_run", "open_run", "ray_store_tail", "saved_findings",
           "series_progress_text", "start_run", "stop_process", "take_stacks"]


# -- runs ---------------------------------------------------------------------------------------
def start_run(spec: RunSpec, stream: RunStream) -> Run:
    """Start ``spec`` with its output, batches, findings and progress going to ``stream``; returns
    the started run (``wait()`` blocks until it ends, ``stop()`` escalates)."""
    from gpuscope.findings.recorder import FindingsRecorder
    from gpuscope.runs.supervisor import Run

    run = Run(spec, output=[stream.on_output], progress=stream.on_progress,
              recorders=[_StreamRecorder(stream), FindingsRecorder(on_finding=stream.on_finding)])
    run.start()
    return run


def live_findings(run: Run) -> list[Finding]:
    """A running run's findings so far, merged (a count that grew shows its new value)."""
    from gpuscope.findings.recorder import FindingsRecorder

    rec = next((r for r in run.recorders if isinstance(r, FindingsRecorder)), None)
    return rec.findings() if rec is not None else []


def gpu_unavailable_reason(run: Run | None = None) -> str | None:
    """None when NVML sees a GPU (of ``run``'s sampler, or probed now), else why not."""
    if run is not None:
        gpu = run.sampler.gpu if run.sampler is not None else None
        return None if gpu is None or gpu.available else (gpu.reason or "no NVIDIA GPU")
    from gpuscope.telemetry.gpu import open_backend

    backend = open_backend()
    try:
        return None if backend.available else (backend.reason or "no NVIDIA GPU")
    finally:
        backend.close()


def main_exited(run_dir: str | Path) -> bool:
    """Whether the run's main process has ended (its event log says so)."""
    from gpuscope.trace.events import main_exited as ended

    return bool(ended(run_dir))


# -- stored runs --------------------------------------------------------------------------------
def open_run(ref: str | Path) -> Any:
    """The typed record of one run, by id or folder (:func:`gpuscope.store.lookup.open_run`)."""
    from gpuscope.store.lookup import open_run as _open_run

    return _open_run(ref)


def open_past_run(run_id: str, run_dir: str | Path, started_ns: int | None = None) -> PastRun:
    """A stored run as the Run tab shows it: samples, roles, output tails, findings, last stacks."""
    from gpuscope.views.past_run import load_past_run

    return load_past_run(run_id, run_dir, started_ns)


def history(limit: int = 200) -> HistoryData:
    """The newest runs with their disk use, compare series grouped (History)."""
    from gpuscope.views.history import query_runs

    return query_runs(limit)


def delete_runs(ids: Sequence[str]) -> tuple[int, int]:
    """Delete runs by id or unique prefix: (runs deleted, bytes freed)."""
    from gpuscope.views.history import delete_runs as delete

    return delete(list(ids))


def load_report(path: str | Path, events_only: bool = False, note: str | None = None,
                cancel: threading.Event | None = None) -> Report:
    """An nsys report, export or run folder as one ``Report`` (``events_only``: the run folder's
    own event logs alone, while nsys is still writing its report; ``cancel`` set: stop, also a
    running nsys export)."""
    from gpuscope.nsys import report as nsys_report

    if events_only:
        return nsys_report.load_events(path, note=nsys_report.PENDING_NOTE if note is None else note)
    from gpuscope.attach.report import is_attached

    if Path(path).is_dir() and is_attached(path):   # gpuscope attach: its profile's samples as lanes
        from gpuscope.views import attach_flame

        return attach_flame.timeline_report(path)
    report = nsys_report.load_report(path, cancel=cancel)
    if Path(path).is_dir():   # a run folder: its PyTorch profiler traces join the timeline and the tables
        from gpuscope.views import torch_ops

        torch_ops.attach(report, Path(path))
    return report


def saved_findings(run_dir: str | Path) -> list[Finding]:
    """The findings a run saved while it ran (its folder's list), without analysing it again."""
    from gpuscope.findings.engine import read_saved

    return read_saved(Path(run_dir))


def ray_store_tail(run_dir: str | Path) -> StoreTail:
    """A reader of a Ray run's object store samples, each call the new ones (docs/RAY.md)."""
    from gpuscope.telemetry.ray_store import StoreTail as Tail

    return Tail(Path(run_dir))


def findings(run_dir: str | Path) -> list[Finding]:
    """Every finding of a finished run (the list ``gpuscope findings`` prints)."""
    from gpuscope.findings.engine import analyse_run

    return analyse_run(run_dir)


# -- stacks -------------------------------------------------------------------------------------
def take_stacks(run_id: str, run_dir: str | Path, timeout_s: float = 5.0
                ) -> tuple[int | None, bool, list[ProcessStacks]]:
    """(taken_ns, live, processes): the stacks of the run's live processes now (saved as the
    latest), or, once none is alive, the last ones taken. Blocking."""
    from gpuscope.findings import stacks

    folder = Path(run_dir)
    pids = stacks.alive_run_pids(run_id)
    if pids:
        procs = stacks.dump_processes(folder, stacks.roles_of(folder, pids), timeout_s=timeout_s)
        stacks.save_latest(folder, procs)
        return time.time_ns(), True, procs
    taken, procs = stacks.load_latest(folder)
    return taken, False, procs


def latest_stacks(run_dir: str | Path) -> tuple[int | None, list[ProcessStacks]]:
    """The last stacks taken of a run: (taken_ns, processes)."""
    from gpuscope.findings.stacks import load_latest

    return load_latest(Path(run_dir))


# -- compare ------------------------------------------------------------------------------------
def compare_series(spec: RunSpec, methods: Sequence[str], repeat: int, stream: RunStream,
                   started: Callable[[str, str, int], None] | None = None,
                   progress: Callable[[int, int, str, int], None] | None = None) -> tuple[Any, Any]:
    """A start-method series ready to run: ``(series, run)`` where ``run()`` runs it (blocking)
    and returns the comparison; ``series.stop()`` ends it. Each run's output and batches go to
    ``stream``; on a core thread, ``progress(i, n, method, repeat)`` before each run and
    ``started(run_id, run_dir, pid)`` as it starts."""
    from gpuscope.analysis.comparison import compare_runs as compare
    from gpuscope.runs.series import StartMethodSeries

    where = {"run": ""}

    def before_run(i: int, n: int, method: str, rep: int) -> None:
        where["run"] = series_progress_text(i, n, method, rep)
        if progress is not None:
            progress(i, n, method, rep)

    series = StartMethodSeries(
        spec, list(methods), repeat, progress=before_run,
        run_kwargs={"output": [stream.on_output],
                    "progress": lambda line: stream.on_progress(f"{where['run']} · {line}"),
                    "recorders": lambda: [_StreamRecorder(stream, started)]})

    def run() -> Comparison:
        return compare(series.run())

    return series, run


def compare_runs(ids: Sequence[str]) -> Comparison:
    """Compare recorded runs by id or unique prefix (grouped by start method)."""
    from gpuscope.analysis.comparison import compare_recorded

    return compare_recorded(list(ids))


# -- cleanup ------------------------------------------------------------------------------------
def cleanup_scanner(conn: Any = None, **options: Any) -> tuple[Scanner, Any]:
    """A scanner of leftovers and the store connection it records into (one per thread)."""
    from gpuscope.cleanup import Scanner as _Scanner
    from gpuscope.store.db import connect

    store: Any = conn if conn is not None else connect()
    return _Scanner(conn=store, **options), store


def stop_process(pid: int, start_time: float | None, kill: bool, grace_s: float,
                 run_id: str | None = None) -> ActionResult | None:
    """Stop (SIGTERM, then SIGKILL after ``grace_s``) or kill one process with cleanup's safety
    rules and identity check; None when it has ended already."""
    from gpuscope.cleanup import model as m
    from gpuscope.cleanup.actions import act, identify
    from gpuscope.cleanup.safety import Policy

    ident = m.ProcIdentity(pid, start_time) if start_time is not None else identify(pid)
    if ident is None:
        return None
    return act(ident, action=m.KILL if kill else m.TERMINATE, policy=Policy(grace_s=grace_s), run_id=run_id)


def cleanup_apply(suspects: Sequence[Suspect], force: bool, grace_s: float,
                  conn: Any) -> list[ActionResult]:
    """Act on chosen suspects with cleanup's safety rules (``force``: processes are killed)."""
    from gpuscope.cleanup import Policy, perform
    from gpuscope.cleanup import model as m

    policy = Policy(grace_s=grace_s)
    return [perform(s, m.KILL if force and s.kind == m.KIND_PROCESS else None, policy=policy, conn=conn)
            for s in suspects]


def series_progress_text(i: int, n: int, method: str, repeat: int) -> str:
    """"run 3 of 6: spawn, repeat 2" (before each run of a series, and in its progress lines)."""
    return f"run {i} of {n}: {method}, repeat {repeat}"


class _StreamRecorder(BaseRecorder):
    """A recorder that sends each telemetry batch (and each start) to a RunStream."""

    name = "app"

    def __init__(self, stream: RunStream, started: Callable[[str, str, int], None] | None = None) -> None:
        self._stream = stream
        self._started = started

    def started(self, ctx: RunContext) -> None:
        if self._started is not None:
            self._started(ctx.run_id, str(ctx.run_dir), ctx.pid)

    def on_batch(self, batch: SampleBatch) -> None:
        self._stream.on_batch(batch)
