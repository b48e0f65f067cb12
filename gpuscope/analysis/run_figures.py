"""One run as numbers that can be set beside another run's (docs/COMPARE.md, "The model").

Everything comes from what the run recorded: its record (``gpuscope.runrecord``: status, wall time,
per-process CPU and peak memory), its event logs (process start-up, ranges per name, tasks), the telemetry
samples (GPU memory per process, CUDA contexts per GPU) and, when the run sampled it, each
process's USS (``uss.json`` in the run folder, written by the USS recorder that
``gpuscope.runs.series`` adds).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscope.analysis.process_times import (bootstrap, first_task, hook_before, hook_span, reimport_modules,
                                             reimport_ms, task_ids)
from gpuscope.analysis.wall_parts import critical_path, wall_parts
from gpuscope.runs.recorders.uss_sampling import USS_FILE   # {pid: peak USS bytes}, when sampled
from gpuscope.trace.events import ProcessEvents, read_run_events

# Processes that are not the program's workers: their start-up is not a worker's start-up.
NOT_WORKERS = frozenset({"main", "torchrun agent", "resource tracker", "forkserver", "subprocess",
                         "unknown", "not injected"})


@dataclass(frozen=True)
class MetricDef:
    """What a comparison figure is: its stable name, unit, title and help."""

    name: str
    unit: str
    title: str            # short, for a table's first column
    help: str = ""        # what exactly is measured (a tooltip, the docs)
    lower_is_better: bool = True


# The metrics in the order of the table; their names are stable (the JSON keys of `compare --json`).
METRICS: tuple[MetricDef, ...] = (
    MetricDef("wall_s", "s", "Wall time", "the run's wall time, start to end"),
    MetricDef("first_task_ms", "ms", "Time to first task",
              "the run's first process starts → the first pool task starts (no tasks: a worker's first range)"),
    MetricDef("child_startup_ms", "ms", "Child start-up",
              "median over the workers: the parent calls Process.start() → the child's first line of Python, "
              "gpuscope's own hook before that moment left out; the re-import of __main__ comes after it "
              "(Re-importing __main__)"),
    MetricDef("main_reimport_ms", "ms", "Re-importing __main__",
              "median over the workers: interpreter ready → multiprocessing's bootstrap begins. Under spawn "
              "and forkserver the worker re-imports the script as __mp_main__ (its top-level imports run "
              "again) and unpickles its process object; fork re-imports nothing (only the bootstrap)"),
    MetricDef("hook_ms", "ms", "  gpuscope's share",
              "median over the workers that started a fresh interpreter: gpuscope's hook in their start "
              "(stated, not counted in the child start-up)"),
    MetricDef("task_ms_median", "ms", "Per-task time, median", "the pool tasks' durations, all workers"),
    MetricDef("task_ms_p95", "ms", "Per-task time, p95", "the pool tasks' durations, all workers"),
    MetricDef("cpu_s", "s", "CPU time", "user + system CPU seconds of all processes"),
    MetricDef("peak_rss_bytes", "bytes", "Peak RSS, summed", "the processes' peak RSS, summed"),
    MetricDef("peak_rss_per_worker_bytes", "bytes", "Peak RSS per worker", "median over the workers"),
    MetricDef("uss_per_worker_bytes", "bytes", "USS per worker",
              "median over the workers of their peak USS: memory only the worker holds (not shared)"),
    MetricDef("gpu_mem_per_process_bytes", "bytes", "GPU memory per process",
              "median over the processes holding GPU memory of their peak"),
    MetricDef("cuda_contexts_per_gpu", "count", "CUDA contexts per GPU",
              "the most processes seen holding memory on one GPU"),
    MetricDef("nsys_coverage_pct", "%", "nsys coverage",
              "of the ranges gpuscope recorded, the share nsys kept in its report", lower_is_better=False),
    MetricDef("processes", "count", "Processes", "processes of the run (by role below)"),
)
ROLE_METRIC = "processes[{}]"   # one count metric per role: processes[pool worker]


@dataclass
class Phase:
    """One step of a worker's start, in ms since the reference."""

    name: str
    ms: float      # since the reference (the parent's start() call, else the parent's start)


@dataclass
class WorkerPhases:
    """The start-up steps of one worker process."""

    pid: int
    role: str
    reference: str          # what phase times count from
    phases: list[Phase]


@dataclass
class RunFigures:
    """What one run looks like, as numbers."""

    run_id: str
    run_dir: str
    status: str
    start_method: str
    spec: dict[str, Any]
    why_left_out: str | None = None       # None: usable (it exited 0)
    has_events: bool = False
    values: dict[str, float | None] = field(default_factory=dict)   # metric name -> value
    roles: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (count, total_ns)
    workers: list[WorkerPhases] = field(default_factory=list)
    parts: dict[str, float] = field(default_factory=dict)   # wall-time part -> ms (analysis/wall_parts.py)
    reimport_modules: list[tuple[str, float]] = field(default_factory=list)   # slowest first, ms
    sampled: list[str] = field(default_factory=list)   # "CPU", "RSS" of some process only sampled
    unmeasured: dict[str, int] = field(default_factory=dict)   # "CPU"/"RSS" -> processes without it

    @property
    def usable(self) -> bool:
        return self.why_left_out is None


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _root(logs: list[ProcessEvents]) -> ProcessEvents | None:
    for role in ("main", "torchrun agent"):
        for pe in logs:
            if pe.role == role:
                return pe
    return logs[0] if logs else None


def _references(logs: list[ProcessEvents]) -> dict[int, tuple[int, int | None, str]]:
    """pid -> (reference ns, start() returned ns or None, what the reference is) for each child."""
    calls: dict[int, list[tuple[int, int]]] = {}
    for pe in logs:
        for t_call, t_ret, pid, _ in pe.children:
            calls.setdefault(pid, []).append((t_call, t_ret))
    starts = {pe.pid: pe.start_ns for pe in logs}
    out: dict[int, tuple[int, int | None, str]] = {}
    for pe in logs:
        before = [c for c in calls.get(pe.pid, []) if c[0] <= pe.start_ns]
        if before:
            t_call, t_ret = max(before)
            out[pe.pid] = (t_call, t_ret, "start() called")
        elif pe.ppid in starts and starts[pe.ppid] <= pe.start_ns:
            out[pe.pid] = (starts[pe.ppid], None, "parent's start")
    return out


def _phases(pe: ProcessEvents, ref: tuple[int, int | None, str], method: str) -> WorkerPhases:
    t_ref, t_ret, what = ref
    ms = lambda t: (t - t_ref) / 1e6  # noqa: E731
    phases = [Phase(what, 0.0)]
    if t_ret is not None:
        phases.append(Phase("process created", ms(t_ret)))
    hook_start, ready = hook_span(pe)
    if hook_start is not None:
        phases.append(Phase("gpuscope's hook", ms(hook_start)))
    phases.append(Phase("interpreter ready", ms(ready)))
    boot = bootstrap(pe)
    if boot is not None:
        phases.append(Phase("__main__ re-imported" if method in ("spawn", "forkserver") else "process bootstrap",
                            ms(boot)))
    loop = next((t for t, upd in pe.info_times if upd.get("role") in ("pool worker", "executor worker")
                 and "mp_name" not in upd), None)
    if loop is not None:
        phases.append(Phase("worker loop ready", ms(loop)))
    r = pe.ranges
    if len(r):
        task = first_task(pe)
        if task is not None:
            phases.append(Phase("first task received", ms(task)))
        first = int(r["t0"].min())
        if task is None or first < task:
            phases.append(Phase("first range", ms(first)))
    return WorkerPhases(pe.pid, pe.role, what, phases)


def _range_totals(logs: list[ProcessEvents]) -> dict[str, tuple[int, int]]:
    acc: dict[str, list[int]] = {}
    for pe in logs:
        r = pe.ranges
        if not len(r):
            continue
        uniq, inv = np.unique(r["nid"], return_inverse=True)
        counts = np.bincount(inv)
        totals = np.bincount(inv, weights=(r["t1"] - r["t0"]).astype(np.float64))
        for nid, c, t in zip(uniq.tolist(), counts.tolist(), totals.tolist()):
            entry = acc.setdefault(pe.label(int(nid)), [0, 0])
            entry[0] += int(c)
            entry[1] += int(round(t))
    return {name: (c, t) for name, (c, t) in acc.items()}


def _task_durations(logs: list[ProcessEvents]) -> np.ndarray:
    parts = []
    for pe in logs:
        tasks = task_ids(pe)
        if tasks and len(pe.ranges):
            r = pe.ranges
            sel = np.isin(r["nid"], tasks)
            parts.append((r["t1"][sel] - r["t0"][sel]))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _first_task_ms(logs: list[ProcessEvents], root: ProcessEvents | None) -> float | None:
    if root is None:
        return None
    firsts = [t for pe in logs if (t := first_task(pe)) is not None]
    if not firsts:  # no pool tasks: the first range a worker opened
        firsts = [int(pe.ranges["t0"].min()) for pe in logs if len(pe.ranges) and pe.role not in NOT_WORKERS]
    return (min(firsts) - root.start_ns) / 1e6 if firsts else None


def _samples(conn: Any, run_id: str) -> tuple[dict[int, dict[str, Any]], int | None]:
    """(per-process sampled figures, most GPU processes on one device) from the store."""
    if conn is None:
        return {}, None
    from gpuscope.store import samples

    try:
        info = samples.series_info(conn, run_id)
        if info is None:
            return {}, None
        procs = samples.read_processes(conn, info["key"])
        per_device: dict[int, set[int]] = {}
        for pid, device, *_ in samples.read_rows(conn, info["key"], "gpu_proc"):
            per_device.setdefault(int(device), set()).add(int(pid))
    except sqlite3.Error:
        return {}, None
    return procs, (max(len(p) for p in per_device.values()) if per_device else None)


def _uss(run_dir: Path) -> dict[int, int]:
    try:
        data = json.loads((run_dir / USS_FILE).read_text())
        return {int(k): int(v) for k, v in data.items() if v}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _nsys_coverage(run_dir: Path, logs: list[ProcessEvents]) -> float | None:
    """Of the ranges gpuscope's event logs hold, the share nsys kept too (per process, capped), in %;
    None when the run has no nsys export or no ranges."""
    export = run_dir / "report.sqlite"
    ours = {pe.pid: len(pe.ranges) for pe in logs if len(pe.ranges)}
    if not export.is_file() or not ours:
        return None
    from gpuscope.nsys.reader import NVTX_RANGE_TYPES   # push/pop and start/end ranges
    try:
        conn = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT (globalTid >> 24) & 16777215, COUNT(*) FROM NVTX_EVENTS WHERE eventType IN "
                f"({', '.join(map(str, NVTX_RANGE_TYPES))}) GROUP BY 1").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    kept = {int(pid): int(n) for pid, n in rows}
    return 100.0 * sum(min(kept.get(pid, 0), n) for pid, n in ours.items()) / sum(ours.values())


def run_figures(row: Any, conn: Any = None) -> RunFigures:
    """The figures of a stored run (``gpuscope.store.runs.RunRow``); ``conn`` a store connection or None."""
    from gpuscope.runrecord import read_folder
    from gpuscope.status import RunStatus

    rec = read_folder(row.run_dir, row)
    run_dir = Path(row.run_dir)
    spec = dict(rec.spec or row.spec or {})
    fig = RunFigures(run_id=row.id, run_dir=str(run_dir), status=rec.status.value,
                     start_method=str(spec.get("start_method") or row.start_method), spec=spec,
                     why_left_out=None if rec.status is RunStatus.EXITED else rec.describe())
    logs = read_run_events(run_dir)
    fig.has_events = bool(logs)
    root = _root(logs)
    refs = _references(logs)
    workers = [pe for pe in logs if pe.role not in NOT_WORKERS and pe.pid in refs]
    worker_pids = {pe.pid for pe in workers}
    method = fig.start_method
    fig.workers = [_phases(pe, refs[pe.pid], pe.start_method or method) for pe in workers]
    startup = [(pe.start_ns - hook_before(pe) - refs[pe.pid][0]) / 1e6 for pe in workers]
    hook = [pe.info["hook_ns"] / 1e6 for pe in workers if isinstance(pe.info.get("hook_ns"), int)]
    reimport = [ms for pe in workers if (ms := reimport_ms(pe)) is not None]
    if root is not None:
        path, first_worker = critical_path(logs, root, refs, workers)
        fig.parts = wall_parts(path, rec.started_ns or None, rec.ended_ns or None)
        # under forkserver the server re-imports __main__ for its children: its log holds the imports
        server = next((pe for pe in logs if pe.role == "forkserver"), None)
        fig.reimport_modules = reimport_modules(first_worker) or reimport_modules(server)
    for pe in logs:
        fig.roles[pe.role] = fig.roles.get(pe.role, 0) + 1
    fig.ranges = _range_totals(logs)
    durations = _task_durations(logs)

    rows = rec.processes
    for p in rows:   # processes the hook never reached (not injected) count by role too
        if not p.injected:
            fig.roles[p.role] = fig.roles.get(p.role, 0) + 1
    cpu = [p.cpu_seconds for p in rows if p.cpu_seconds is not None]
    rss = [p.peak_rss_bytes for p in rows if p.peak_rss_bytes is not None]
    worker_rss = [float(p.peak_rss_bytes) for p in rows if p.pid in worker_pids and p.peak_rss_bytes]
    for what, got in (("CPU", [p for p in rows if p.cpu_seconds is not None]),
                      ("RSS", [p for p in rows if p.peak_rss_bytes is not None])):
        if rows and len(got) < len(rows):
            fig.unmeasured[what] = len(rows) - len(got)
    fig.sampled = sorted({f for p in rows for f, src in (("CPU", p.cpu_source), ("RSS", p.rss_source))
                          if src == "sampled"})
    sampled, contexts = _samples(conn, row.id)
    uss = _uss(run_dir) or {pid: int(s["uss_bytes"]) for pid, s in sampled.items() if s.get("uss_bytes")}
    gpu = [float(s["peak_gpu_mem_bytes"]) for s in sampled.values() if s.get("peak_gpu_mem_bytes")]
    gpu = gpu or [float(p.peak_gpu_mem_bytes) for p in rows if p.peak_gpu_mem_bytes]
    wall = rec.duration_s
    fig.values = {
        "wall_s": float(wall) if wall is not None else None,
        "first_task_ms": _first_task_ms(logs, root),
        "child_startup_ms": _median(startup),
        "main_reimport_ms": _median(reimport),
        "hook_ms": _median(hook),
        "task_ms_median": float(np.median(durations)) / 1e6 if len(durations) else None,
        "task_ms_p95": float(np.percentile(durations, 95)) / 1e6 if len(durations) else None,
        "cpu_s": round(sum(cpu), 3) if cpu else None,
        "peak_rss_bytes": float(sum(rss)) if rss else None,
        "peak_rss_per_worker_bytes": _median(worker_rss),
        "uss_per_worker_bytes": _median([float(v) for pid, v in uss.items() if pid in worker_pids]),
        "gpu_mem_per_process_bytes": _median(gpu),
        "cuda_contexts_per_gpu": float(contexts) if contexts is not None else None,
        "nsys_coverage_pct": _nsys_coverage(run_dir, logs) if (spec.get("nsys") or {}).get("enabled") else None,
        "processes": float(sum(fig.roles.values())) if fig.roles else None,
    }
    return fig
