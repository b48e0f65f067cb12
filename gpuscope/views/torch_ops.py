"""A run's PyTorch profiler traces in the report (no Qt): their events on the report's timeline,
and the "Torch ops" tables with the timeline items of each row.

On the timeline, every CPU-side event of a trace (operators, ``record_function`` labels, CUDA
runtime calls) is an NVTX-like range of source ``torch`` on its own thread, so the lanes nest
them per thread, and highlight and measure treat them like any range; GPU events are kernels of
the process, in lanes of their own per (device, stream). Each trace is placed on the report's
clock with the offset gpuscope measured at profile start (``clock_offset_ns``, the trace's
uncertainty beside it), or, for a trace without one, through the run's wall clock; never by a
shift to a common minimum.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gpuscope.torchtrace import ranks as R
from gpuscope.torchtrace.ops import DEVICE_CATS, OpRow, step_name
from gpuscope.trace import timeline as T
from gpuscope.views.timeline_text import fmt_ns

if TYPE_CHECKING:
    from gpuscope.nsys.report import Report
    from gpuscope.torchtrace.reader import TorchTrace
    from gpuscope.torchtrace.report import TorchOps

CLOCK_MARK = "gpuscope:clock"      # torchprof's clock marks: not the program's work
LEFT_OUT = {"[memory]", "[OutOfMemory]", CLOCK_MARK}
TORCH_PROCESS = 1 << T.SOURCE_TORCH


@dataclass
class Placement:
    """Where one trace went on the timeline: ``ranges[i]`` / ``kernels[i]`` is the timeline row of
    the trace's event ``i`` (-1: not drawn there), ``shift_ns`` what was subtracted from its times."""

    rank: int
    pid: int
    shift_ns: int
    clock: str
    ranges: np.ndarray
    kernels: np.ndarray


@dataclass
class TorchReport:
    """The torch part of a report: the tables (``gpuscope.torchtrace.report.TorchOps``) and, once the
    timeline is read, where each rank's events are on it."""

    ops: TorchOps
    placed: dict[int, Placement] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    by_shapes: dict[int, list[OpRow]] | None = None   # rank -> rows grouped by input shapes, when asked for

    @property
    def ranks(self) -> list[int]:
        return [x.rank for x in self.ops.ranks]

    def pid_of(self, rank: int) -> int:
        return next(x.trace.pid for x in self.ops.ranks if x.rank == rank)


# --------------------------------------------------------------------------- the clock

def clock_text(tr: TorchTrace) -> str:
    """How the trace's times were put on gpuscope's clock, for a lane's tooltip."""
    sign = "+" if tr.clock_offset_ns >= 0 else "−"
    if tr.clock_uncertainty_ns is not None:
        return (f"on gpuscope's clock within ± {fmt_ns(tr.clock_uncertainty_ns)} (offset from the profiler's "
                f"clock measured at profile start: {sign}{fmt_ns(abs(tr.clock_offset_ns))})")
    if tr.clock_offset_ns:
        return f"on gpuscope's clock by an offset of {sign}{fmt_ns(abs(tr.clock_offset_ns))} (uncertainty not recorded)"
    return "the trace's own wall clock (no offset measured): placed through the run's wall clock"


def _shift(tl: T.Timeline, tr: TorchTrace, wall_minus_mono: int | None) -> int | None:
    """What to subtract from the trace's ``ts_ns`` to get the timeline's time, or None (no base)."""
    measured = tr.clock_uncertainty_ns is not None or tr.clock_offset_ns != 0
    mono, wall = tl.mono_base_ns, tl.wall_base_ns
    if measured:   # ts_ns is CLOCK_MONOTONIC
        if mono is not None:
            return int(mono)
        return None if wall is None or wall_minus_mono is None else int(wall) - wall_minus_mono
    if wall is not None:      # ts_ns is the wall clock Kineto reads
        return int(wall)
    return None if mono is None or wall_minus_mono is None else int(mono) + wall_minus_mono


# --------------------------------------------------------------------------- the timeline

def _thread_names(tl: T.Timeline, pid: int, names: dict[int, str]) -> None:
    """Kineto's thread names (``thread 11201 (pt_gloo_runloop)``) for threads the timeline has none for."""
    named = {int(t) for p, t, n in zip(tl.threads.pid, tl.threads.tid, tl.threads.name_id) if p == pid and n >= 0}
    known = {int(t) for p, t in zip(tl.threads.pid, tl.threads.tid) if p == pid}
    add, rename = [], {}
    for tid, text in names.items():
        inner = text[text.find("(") + 1:text.rfind(")")] if "(" in text and text.endswith(")") else text
        if tid in named or not inner:
            continue
        if tid in known:
            rename[tid] = tl.strings.intern(inner)
        else:
            add.append((tid, tl.strings.intern(inner)))
    if rename:
        hit = (tl.threads.pid == pid) & np.isin(tl.threads.tid, list(rename))
        for i in np.flatnonzero(hit).tolist():
            tl.threads.name_id[i] = rename[int(tl.threads.tid[i])]
    if add:
        tl.threads = T.Threads.concat([tl.threads, T.Threads(
            pid=T.column("pid", [pid] * len(add)), tid=T.column("tid", [a[0] for a in add]),
            name_id=T.column("name_id", [a[1] for a in add]))])


def _string_lut(tl: T.Timeline, tr: TorchTrace) -> np.ndarray:
    return np.array([tl.strings.intern(s) for s in tr.strings], dtype=np.int32) if tr.strings \
        else np.zeros(0, np.int32)


def _ranges_of(tl: T.Timeline, tr: TorchTrace, keep: np.ndarray, shift: int, lut: np.ndarray) -> T.Ranges:
    c = tr.cols
    n = len(keep)
    start = c["ts_ns"][keep] - shift
    return T.Ranges(start_ns=start, end_ns=start + c["dur_ns"][keep], pid=T.column("pid", c["pid"][keep]),
                    tid=T.column("tid", c["tid"][keep]), depth=np.zeros(n, np.int16),
                    name_id=lut[c["name"][keep]], color=np.zeros(n, np.uint32),
                    domain_id=np.zeros(n, np.int32), category=np.zeros(n, np.int32),
                    style=np.full(n, T.STYLE_PUSHPOP, np.uint8), source=np.full(n, T.SOURCE_TORCH, np.uint8),
                    flags=np.zeros(n, np.uint8), end_tid=np.full(n, -1, np.int32))


def _kernels_of(tr: TorchTrace, keep: np.ndarray, shift: int, lut: np.ndarray) -> T.Kernels:
    c = tr.cols
    n = len(keep)
    start = c["ts_ns"][keep] - shift
    # Kineto's GPU events carry pid = device and tid = stream; the args say the same when present
    device = np.where(c["device"][keep] >= 0, c["device"][keep], c["pid"][keep])
    stream = np.where(c["stream"][keep] >= 0, c["stream"][keep], c["tid"][keep])
    name = lut[c["name"][keep]]
    return T.Kernels(start_ns=start, end_ns=start + c["dur_ns"][keep], pid=np.full(n, tr.pid, np.int32),
                     device=T.column("device", device), context=np.full(n, -1, np.int32),
                     stream=T.column("stream", stream), correlation=T.column("correlation", c["correlation"][keep]),
                     name_id=name, short_name_id=name, grid=np.full((n, 3), -1, np.int32),
                     block=np.full((n, 3), -1, np.int32))


def add_to_timeline(tl: T.Timeline, torch: TorchReport, wall_minus_mono: int | None = None) -> None:
    """Append every rank's events to ``tl`` (source ``torch``) and note in ``torch.placed`` where."""
    ranges: list[T.Ranges] = []
    kernels: list[T.Kernels] = []
    n_ranges, n_kernels = len(tl.ranges), len(tl.kernels)
    tl.torch_rows.setdefault("kernels", n_kernels)
    for x in torch.ops.ranks:
        tr = x.trace
        shift = _shift(tl, tr, wall_minus_mono)
        if shift is None:
            torch.notes.append(f"rank {x.rank}: torch trace not drawn: the report has no clock to put it on")
            continue
        c = tr.cols
        lut = _string_lut(tl, tr)
        left_out = np.isin(c["name"], [tr.string_id(n) for n in LEFT_OUT if tr.string_id(n) >= 0])
        timed = (c["ph"] == ord("X")) & (c["dur_ns"] >= 0) & ~left_out
        device = tr.is_cat(*DEVICE_CATS)
        cpu_rows, gpu_rows = np.flatnonzero(timed & ~device), np.flatnonzero(timed & device)
        at_r, at_k = np.full(len(tr), -1, np.int64), np.full(len(tr), -1, np.int64)
        at_r[cpu_rows] = n_ranges + np.arange(len(cpu_rows))
        at_k[gpu_rows] = n_kernels + np.arange(len(gpu_rows))
        n_ranges += len(cpu_rows)
        n_kernels += len(gpu_rows)
        ranges.append(_ranges_of(tl, tr, cpu_rows, shift, lut))
        kernels.append(_kernels_of(tr, gpu_rows, shift, lut))
        _thread_names(tl, tr.pid, tr.thread_names)
        if not (tl.processes.pid == tr.pid).any():
            tl.processes = T.Processes.concat([tl.processes, T.Processes(
                pid=T.column("pid", [tr.pid]), name_id=T.column("name_id", [tl.strings.intern(f"rank {x.rank}")]),
                source=np.array([TORCH_PROCESS], np.uint8))])
        tl.torch_clocks[tr.pid] = f"rank {x.rank}: PyTorch profiler trace, {clock_text(tr)}"
        torch.placed[x.rank] = Placement(x.rank, tr.pid, shift, clock_text(tr), at_r, at_k)
    if ranges:
        tl.ranges = T.Ranges.concat([tl.ranges, *ranges])
        T.compute_depths(tl.ranges)
        tl.kernels = T.Kernels.concat([tl.kernels, *kernels])


# --------------------------------------------------------------------------- the tables

def all_ranks_rows(tables: dict[int, list[OpRow]]) -> list[OpRow]:
    """The key_averages table over every rank: each (name, shapes, device) row summed."""
    rows: dict[tuple[str, str, bool], OpRow] = {}
    for ops in tables.values():
        for op in ops:
            got = rows.setdefault((op.name, op.shapes, op.device), OpRow(op.name, shapes=op.shapes, device=op.device))
            for f in ("count", "self_cpu_us", "cpu_total_us", "self_cuda_us", "cuda_total_us", "self_cpu_mem",
                      "cpu_mem", "self_cuda_mem", "cuda_mem"):
                setattr(got, f, getattr(got, f) + getattr(op, f))
    return list(rows.values())


def has_shapes(torch: TorchReport) -> bool:
    """The traces recorded input shapes (``--torch-profile-shapes``)."""
    return any(bool((x.trace.cols["shapes"] >= 0).any()) for x in torch.ops.ranks)


def group_by_shapes(torch: TorchReport) -> dict[int, list[OpRow]]:
    """Each rank's rows grouped by input shapes (computed once; slow on big traces: a worker's job)."""
    if torch.by_shapes is None:
        from gpuscope.torchtrace.ops import key_averages, sort_rows

        torch.by_shapes = {x.rank: sort_rows(key_averages(x.trace, by_shapes=True), torch.ops.sort)
                           for x in torch.ops.ranks}
    return torch.by_shapes


def op_rows(torch: TorchReport, rank: int | None, shapes: bool = False) -> list[OpRow]:
    """One rank's key_averages rows (None: all ranks), in the report's sort order; ``shapes``:
    grouped by input shapes (:func:`group_by_shapes` must have run)."""
    tables = torch.by_shapes if shapes and torch.by_shapes is not None else {x.rank: x.ops for x in torch.ops.ranks}
    if rank is None:
        from gpuscope.torchtrace.ops import sort_rows

        return sort_rows(all_ranks_rows(tables), torch.ops.sort)
    return tables.get(rank, [])


def _names_matching(tr: TorchTrace, name: str) -> list[int]:
    """String ids of the events a table row named ``name`` counts (``ProfilerStep*``: every step)."""
    if name == "ProfilerStep*":
        return [i for i, s in enumerate(tr.strings) if step_name(s) == name]
    sid = tr.string_id(name)
    return [sid] if sid >= 0 else []


def events_of(torch: TorchReport, name: str, rank: int | None = None, device: bool = False,
              step: int | None = None, shapes: str = "") -> tuple[str, np.ndarray]:
    """(timeline table, its rows) of the events a table row stands for: operator ``name`` (with
    ``shapes``, of those input shapes; or, with ``step``, the step's ``ProfilerStep#N`` ranges) on
    ``rank`` (None: every rank)."""
    table = "kernels" if device else "ranges"
    parts = []
    for x in torch.ops.ranks:
        where = torch.placed.get(x.rank)
        if where is None or (rank is not None and x.rank != rank):
            continue
        tr = x.trace
        ids = [tr.string_id(f"{R.STEP_PREFIX}{step}")] if step is not None else _names_matching(tr, name)
        hit = np.isin(tr.cols["name"], [i for i in ids if i >= 0])
        if shapes:   # key_averages counts an event without recorded shapes as "[]"
            sid = tr.string_id(shapes)
            hit &= (tr.cols["shapes"] == sid) | ((tr.cols["shapes"] < 0) if shapes == "[]" else False)
        at = (where.kernels if device else where.ranges)[np.flatnonzero(hit)]
        parts.append(at[at >= 0])
    return table, (np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)).astype(np.int64)


@dataclass
class StepLine:
    """One step number over ranks, as the Steps table shows it (milliseconds)."""

    step: int
    by_rank_ms: dict[int, float]
    wait_by_rank_ms: dict[int, float]
    slowest_rank: int
    median_work_ms: float
    spread_ms: float


def step_lines(torch: TorchReport) -> list[StepLine]:
    return [StepLine(s.step, {r: v / 1000 for r, v in s.by_rank.items()},
                     {r: v / 1000 for r, v in s.wait_by_rank.items()}, s.slowest_rank, s.median_us / 1000,
                     s.spread_us / 1000) for s in torch.ops.steps]


def straggler_text(torch: TorchReport) -> str:
    """One line on the straggler rank (empty with one rank or no steps)."""
    g = torch.ops.straggler
    if g is None:
        return ""
    return (f"Straggler: rank {g.rank}, slowest in {g.steps_slowest} of {g.steps} steps, "
            f"{g.extra_us / 1000:.2f} ms more work than the other ranks' median (time waiting in collectives "
            "left out)")


def cross_summary(row: R.CrossRow) -> tuple[float, float, float]:
    """(median, min, max) of an operator over ranks, microseconds."""
    vals = list(row.by_rank.values())
    return statistics.median(vals), min(vals), max(vals)


# --------------------------------------------------------------------------- a report's torch part

def attach(report: Report, run_dir: Path) -> None:
    """Give a run folder's report its torch part (``report.torch``) and the traces' events on its
    timeline. A timeline not read yet reads the traces with it (the summaries show first); a run
    without traces is left as it was; unreadable traces are notes."""
    from gpuscope.torchtrace.run import has_traces

    if not has_traces(run_dir):
        return
    if report.loaded is not None:
        _read_and_place(report, run_dir, report.loaded)
        return
    earlier = report.loader

    def load() -> T.Timeline:
        tl = earlier() if earlier is not None else T.Timeline()
        _read_and_place(report, run_dir, tl)
        return tl

    report.loader = load


def _read_and_place(report: Report, run_dir: Path, tl: T.Timeline) -> None:
    from gpuscope.torchtrace.report import build
    from gpuscope.torchtrace.run import load_run

    run = load_run(run_dir)
    if not run.traces:
        report.notes.extend(run.problems)
        return
    torch = TorchReport(build(run), notes=list(run.problems))
    add_to_timeline(tl, torch, _wall_minus_mono(run_dir) if _needs_anchor(tl) else None)
    report.notes.extend(torch.notes)
    report.torch = torch


def _needs_anchor(tl: T.Timeline) -> bool:
    return tl.mono_base_ns is None or tl.wall_base_ns is None


def _wall_minus_mono(run_dir: Path) -> int | None:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC from the run's event logs (their anchor pairs)."""
    from gpuscope.trace import coverage

    return coverage.wall_minus_mono(coverage.read_events(run_dir))
