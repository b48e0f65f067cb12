"""What the torch-ops findings look for, on a run's :class:`~gpuscope.torchtrace.report.TorchOps`
(thresholds and their meaning: docs/TORCH-PROFILER.md, "Findings from the ops")."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from gpuscope.torchtrace.ops import ASYNC_PREFIXES
from gpuscope.torchtrace.ranks import COLLECTIVE_OPS, Step
from gpuscope.torchtrace.reader import TorchTrace
from gpuscope.torchtrace.report import RankOps, TorchOps

SLOW_SHARE = 0.2          # the straggler's extra work per step, as a share of the median step
SLOW_STEPS = 2 / 3        # ... in at least this share of the steps
WAIT_SHARE = 0.25         # a rank's time waiting in collectives, share of its step time (median step)
LOADER_SHARE = 0.4        # DataLoader's __next__ inside a step, share of the step (median step)
LOADER_PREFIX = "enumerate(DataLoader)#"
IDLE_SHARE = 0.5          # GPU idle between a step's kernels, share of their span (median step)
MIN_KERNELS = 10          # ... with at least this many kernels per step
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "hipDeviceSynchronize", "hipStreamSynchronize", "hipMemcpy")
NOT_WORK = ("ProfilerStep*",)


@dataclass
class SlowRank:
    """The rank with the most work in most steps, and the ops that make it (:func:`slow_rank`)."""

    rank: int
    pid: int
    steps_slowest: int
    steps: int
    extra_us_per_step: float
    median_step_us: float
    ops: list[tuple[str, float]]      # (name, its extra time on this rank over the others' median, µs)


def _is_collective(name: str) -> bool:
    return name.startswith(ASYNC_PREFIXES) or name.startswith(COLLECTIVE_OPS)


def slow_rank(t: TorchOps) -> SlowRank | None:
    """The rank with the most work in most steps, when its extra work is a real share of a step."""
    g = t.straggler
    shared = [s for s in t.steps if len(s.by_rank) > 1]
    if g is None or not shared or g.steps_slowest < SLOW_STEPS * g.steps:
        return None
    extra = [s.work_us(g.rank) - statistics.median([s.work_us(r) for r in s.by_rank if r != g.rank])
             for s in shared]
    per_step = sum(extra) / len(extra)
    median_step = statistics.median(v for s in shared for v in s.by_rank.values())
    if per_step < SLOW_SHARE * median_step:
        return None
    mine = next(x for x in t.ranks if x.rank == g.rank)
    others = [x for x in t.ranks if x.rank != g.rank]
    diffs = []
    for op in mine.ops:
        if op.name in NOT_WORK or _is_collective(op.name):
            continue
        theirs = [sum(o.self_cpu_us + o.self_cuda_us for o in x.ops if o.name == op.name) for x in others]
        diff = op.self_cpu_us + op.self_cuda_us - statistics.median(theirs)
        if diff > 0:
            diffs.append((op.name, diff))
    diffs.sort(key=lambda d: d[1], reverse=True)
    return SlowRank(g.rank, mine.trace.pid, g.steps_slowest, g.steps, per_step, median_step, diffs[:3])


@dataclass
class Wait:
    """A rank's time waiting in collectives, and for which rank (:func:`collective_waits`)."""

    rank: int
    pid: int
    wait_us: float
    step_us: float
    waited_for: int                   # the rank that arrived last most often


def collective_waits(t: TorchOps) -> list[Wait]:
    """Ranks that spend at least WAIT_SHARE of their steps waiting in collectives for a later rank."""
    out = []
    last: dict[int, int] = {}
    for c in t.collectives:
        last[c.last_rank] = last.get(c.last_rank, 0) + 1
    for x in t.ranks:
        mine = [s for s in t.steps if s.by_rank.get(x.rank, 0.0) > 0]
        step_us = sum(s.by_rank[x.rank] for s in mine)
        wait_us = sum(s.wait_by_rank.get(x.rank, 0.0) for s in mine)
        shares = [s.wait_by_rank.get(x.rank, 0.0) / s.by_rank[x.rank] for s in mine]
        if shares and statistics.median(shares) >= WAIT_SHARE:     # the median step: one hiccup is no pattern
            others = {r: n for r, n in last.items() if r != x.rank}
            out.append(Wait(x.rank, x.trace.pid, wait_us, step_us,
                            max(others, key=lambda r: others[r]) if others else -1))
    return out


def _in_steps(tr: TorchTrace, steps: list[Step], rows: np.ndarray) -> dict[int, list[int]]:
    """The rows (event indices) that start inside each step, by step number."""
    ts = tr.cols["ts_ns"]
    out: dict[int, list[int]] = {s.step: [] for s in steps}
    for s in steps:
        inside = rows[(ts[rows] >= s.start_ns) & (ts[rows] < s.end_ns)]
        out[s.step] = inside.tolist()
    return out


@dataclass
class LoaderWait:
    """A rank whose steps wait on the DataLoader (:func:`dataloader_waits`)."""

    rank: int
    pid: int
    share: float                      # of the median step
    loader_us_per_step: float


def dataloader_waits(t: TorchOps) -> list[LoaderWait]:
    """Ranks whose median step spends LOADER_SHARE or more in the DataLoader's ``__next__``."""
    out = []
    for x in t.ranks:
        tr = x.trace
        ids = [i for i, s in enumerate(tr.strings) if s.startswith(LOADER_PREFIX)]
        if not ids or not x.steps:
            continue
        rows = np.flatnonzero(np.isin(tr.cols["name"], ids) & (tr.cols["ph"] == ord("X")))
        per = _in_steps(tr, x.steps, rows)
        shares, times = [], []
        for s in x.steps:
            spent = int(tr.cols["dur_ns"][per[s.step]].sum()) if per[s.step] else 0
            shares.append(spent / s.dur_ns if s.dur_ns > 0 else 0.0)
            times.append(spent / 1000)
        if statistics.median(shares) >= LOADER_SHARE:
            out.append(LoaderWait(x.rank, tr.pid, statistics.median(shares), statistics.median(times)))
    return out


@dataclass
class LaunchBound:
    """A rank whose GPU sits idle between a step's kernels."""

    rank: int
    pid: int
    idle_share: float                 # median step
    kernels_per_step: float
    median_kernel_us: float


def _kernel_steps(x: RankOps) -> dict[int, np.ndarray]:
    """Each step's kernels: those launched (runtime call, same correlation) inside it."""
    tr = x.trace
    c = tr.cols
    kernels = np.flatnonzero(tr.is_cat("kernel") & (c["ph"] == ord("X")))
    runtime = np.flatnonzero(tr.is_cat("cuda_runtime", "cuda_driver") & (c["correlation"] >= 0))
    launched = dict(zip(c["correlation"][runtime].tolist(), c["ts_ns"][runtime].tolist()))
    at = np.array([launched.get(k, -1) for k in c["correlation"][kernels].tolist()], np.int64)
    out = {}
    for s in x.steps:
        out[s.step] = kernels[(at >= s.start_ns) & (at < s.end_ns)]
    return out


def launch_bound(t: TorchOps) -> list[LaunchBound]:
    """Ranks whose GPU sits idle between kernels for most of a step's kernel span."""
    out = []
    for x in t.ranks:
        c = x.trace.cols
        idle, counts, durs = [], [], []
        for rows in _kernel_steps(x).values():
            if len(rows) < MIN_KERNELS:
                continue
            start = c["ts_ns"][rows]
            end = start + c["dur_ns"][rows]
            order = np.argsort(start)
            busy, reach = 0, None
            for s, e in zip(start[order].tolist(), end[order].tolist()):
                if reach is None or s >= reach:
                    busy, reach = busy + e - s, e
                elif e > reach:
                    busy, reach = busy + e - reach, e
            span = int(end.max() - start.min())
            idle.append(1 - busy / span if span > 0 else 0.0)
            counts.append(len(rows))
            durs += (c["dur_ns"][rows] / 1000).tolist()
        if idle and statistics.median(idle) >= IDLE_SHARE:
            out.append(LaunchBound(x.rank, x.trace.pid, statistics.median(idle), statistics.median(counts),
                                   statistics.median(durs)))
    return out


@dataclass
class SyncCalls:
    """A rank whose steps call something that waits for the GPU (:func:`sync_calls`)."""

    rank: int
    pid: int
    steps_with: int
    steps: int
    calls_per_step: float
    blocked_us_per_step: float
    callers: list[str]                # the outermost ops around the calls (aten::item, aten::to ...)


def sync_calls(t: TorchOps) -> list[SyncCalls]:
    """Ranks whose steps (at least half of them) call something that waits for the GPU."""
    out = []
    for x in t.ranks:
        tr = x.trace
        ids = [i for i, s in enumerate(tr.strings) if s in SYNC_CALLS]
        if not ids or not x.steps:
            continue
        c = tr.cols
        rows = np.flatnonzero(np.isin(c["name"], ids) & (c["ph"] == ord("X")))
        per = _in_steps(tr, x.steps, rows)
        with_calls = [v for v in per.values() if v]
        if len(with_calls) < max(1, len(x.steps) / 2):
            continue
        calls = [i for v in with_calls for i in v]
        callers = _callers(tr, calls, x.steps)
        out.append(SyncCalls(x.rank, tr.pid, len(with_calls), len(x.steps), len(calls) / len(x.steps),
                             int(c["dur_ns"][calls].sum()) / 1000 / len(x.steps), callers))
    return out


def _callers(tr: TorchTrace, rows: list[int], steps: list[Step]) -> list[str]:
    """Names of the outermost CPU ops (below the step) that enclose ``rows``, most frequent first."""
    c = tr.cols
    ops = np.flatnonzero(tr.is_cat("cpu_op") & (c["ph"] == ord("X")))
    start, end, tid = c["ts_ns"][ops], c["ts_ns"][ops] + c["dur_ns"][ops], c["tid"][ops]
    counts: dict[str, int] = {}
    for i in rows:
        ts, t_ = c["ts_ns"][i], c["tid"][i]
        inside = ops[(start <= ts) & (end >= ts) & (tid == t_)]
        if len(inside):
            outer = inside[np.argmin(c["ts_ns"][inside])]
            name = tr.strings[c["name"][outer]]
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda n: counts[n], reverse=True)[:3]
