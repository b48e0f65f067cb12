"""Across ranks: per-step times and the straggler, one operator's time over ranks, and the
collectives of different ranks matched to one another (by ``seq_num`` where the trace has it,
else by their order within the same ``ProfilerStep#N``)."""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from gpuscope.torchtrace.ops import ASYNC_PREFIXES, OpRow
from gpuscope.torchtrace.reader import TorchTrace

STEP_PREFIX = "ProfilerStep#"
COLLECTIVE_OPS = ("c10d::", "record_param_comms")


def rank_of(tr: TorchTrace, position: int) -> int:
    """The trace's rank, else its position among the traces (a single process is rank 0)."""
    return tr.rank if tr.rank is not None else position


@dataclass
class Step:
    """One ``ProfilerStep#N`` range of one rank (times on the trace's clock after the offset)."""

    rank: int
    pid: int
    step: int
    start_ns: int
    dur_ns: int

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


def steps_of(tr: TorchTrace, rank: int) -> list[Step]:
    """The rank's profiler steps, in time order (the outermost range of each number)."""
    c = tr.cols
    out: dict[int, Step] = {}
    for sid, text in enumerate(tr.strings):
        if not text.startswith(STEP_PREFIX) or not text[len(STEP_PREFIX):].isdigit():
            continue
        n = int(text[len(STEP_PREFIX):])
        for i in np.flatnonzero((c["name"] == sid) & (c["ph"] == ord("X"))).tolist():
            if c["pid"][i] != tr.pid and tr.pid >= 0:
                continue
            s = Step(rank, tr.pid, n, int(c["ts_ns"][i]), int(c["dur_ns"][i]))
            if n not in out or s.dur_ns > out[n].dur_ns:
                out[n] = s
    return sorted(out.values(), key=lambda s: s.start_ns)


@dataclass
class StepRow:
    """One step number over ranks. Collectives make ranks' steps end together, so the slowest rank
    is the one with the most work: its step time less its time waiting in collectives."""

    step: int
    by_rank: dict[int, float]         # duration, microseconds
    wait_by_rank: dict[int, float]    # time waiting in collectives for a later rank, microseconds
    slowest_rank: int
    median_us: float                  # of the work (duration less waiting)
    spread_us: float                  # most work minus least

    def work_us(self, rank: int) -> float:
        return self.by_rank[rank] - self.wait_by_rank.get(rank, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "by_rank_us": {str(r): round(v, 3) for r, v in self.by_rank.items()},
                "wait_by_rank_us": {str(r): round(v, 3) for r, v in self.wait_by_rank.items()},
                "slowest_rank": self.slowest_rank, "median_work_us": round(self.median_us, 3),
                "spread_us": round(self.spread_us, 3)}


def step_table(steps: dict[int, list[Step]], waits: dict[tuple[int, int], int] | None = None) -> list[StepRow]:
    """Each step number: its duration and collective wait per rank, and the slowest rank.
    ``waits``: (rank, step) -> nanoseconds waited (:func:`waits_by_step`)."""
    waits = waits or {}
    by_num: dict[int, dict[int, float]] = {}
    for rank, rows in steps.items():
        for s in rows:
            by_num.setdefault(s.step, {})[rank] = s.dur_ns / 1000
    out = []
    for n in sorted(by_num):
        d = dict(sorted(by_num[n].items()))
        w = {r: waits.get((r, n), 0) / 1000 for r in d}
        work = {r: d[r] - w[r] for r in d}
        slow = max(work, key=lambda r: (work[r], -r))
        out.append(StepRow(n, d, w, slow, statistics.median(work.values()),
                           max(work.values()) - min(work.values())))
    return out


def waits_by_step(matched: Sequence[Collective], steps: dict[int, list[Step]]) -> dict[tuple[int, int], int]:
    """(rank, step) -> nanoseconds the rank waited in collectives for the last rank to arrive."""
    out: dict[tuple[int, int], int] = {}
    for coll in matched:
        for rank, start in coll.start_ns.items():
            rows = steps.get(rank, [])
            step = _step_at(rows, [s.start_ns for s in rows], start)
            if step is not None:
                out[(rank, step)] = out.get((rank, step), 0) + coll.wait_ns(rank)
    return out


@dataclass
class Straggler:
    """The rank slowest in most steps."""

    rank: int
    steps_slowest: int
    steps: int
    extra_us: float                   # its work over the other ranks' median, summed over those steps

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "steps_slowest": self.steps_slowest, "steps": self.steps,
                "extra_us": round(self.extra_us, 3)}


def straggler(rows: Sequence[StepRow]) -> Straggler | None:
    """The rank slowest in most shared steps (None with fewer than two ranks)."""
    shared = [r for r in rows if len(r.by_rank) > 1]
    if not shared:
        return None
    wins: dict[int, int] = {}
    for r in shared:
        wins[r.slowest_rank] = wins.get(r.slowest_rank, 0) + 1
    rank = max(wins, key=lambda k: (wins[k], -k))
    extra = sum(r.work_us(rank) - statistics.median(r.work_us(o) for o in r.by_rank if o != rank)
                for r in shared if r.slowest_rank == rank)
    return Straggler(rank, wins[rank], len(shared), extra)


@dataclass
class CrossRow:
    """One operator over ranks (the metric: a key_averages column, microseconds)."""

    name: str
    metric: str
    by_rank: dict[int, float]
    counts: dict[int, int] = field(default_factory=dict)

    @property
    def median_us(self) -> float:
        return statistics.median(self.by_rank.values())

    @property
    def slowest_rank(self) -> int:
        return max(self.by_rank, key=lambda r: (self.by_rank[r], -r))

    def to_dict(self) -> dict[str, Any]:
        vals = self.by_rank.values()
        return {"name": self.name, "metric": self.metric, "ranks": len(self.by_rank),
                "median_us": round(self.median_us, 3), "min_us": round(min(vals), 3),
                "max_us": round(max(vals), 3), "slowest_rank": self.slowest_rank,
                "by_rank_us": {str(r): round(v, 3) for r, v in sorted(self.by_rank.items())},
                "count_by_rank": {str(r): c for r, c in sorted(self.counts.items())}}


def across_ranks(tables: dict[int, list[OpRow]], metric: str = "self_cpu_us") -> list[CrossRow]:
    """Per operator name: its ``metric`` on each rank that ran it (ranks without it are absent, not
    zero), the largest spread first."""
    rows: dict[str, CrossRow] = {}
    for rank, table in tables.items():
        for op in table:
            row = rows.setdefault(op.name, CrossRow(op.name, metric, {}, {}))
            row.by_rank[rank] = row.by_rank.get(rank, 0.0) + getattr(op, metric)
            row.counts[rank] = row.counts.get(rank, 0) + op.count
    return sorted(rows.values(), key=lambda r: (max(r.by_rank.values()) - min(r.by_rank.values())), reverse=True)


@dataclass
class Collective:
    """One collective call matched over ranks: each rank's start and end."""

    key: tuple[Any, ...]              # ("seq", n) or ("step", N, name, k)
    name: str
    start_ns: dict[int, int]
    end_ns: dict[int, int]

    @property
    def last_arrival_ns(self) -> int:
        return max(self.start_ns.values())

    @property
    def last_rank(self) -> int:
        return max(self.start_ns, key=lambda r: (self.start_ns[r], -r))

    def wait_ns(self, rank: int) -> int:
        """How long ``rank`` waited in it for the last rank to arrive (within its own duration)."""
        return max(0, min(self.last_arrival_ns, self.end_ns[rank]) - self.start_ns[rank])


def _collective_rows(tr: TorchTrace) -> np.ndarray:
    """The trace's collective events: process-group work events if any, else c10d ops."""
    c = tr.cols
    work = [i for i, s in enumerate(tr.strings) if s.startswith(ASYNC_PREFIXES)]
    ids = work or [i for i, s in enumerate(tr.strings) if s.startswith(COLLECTIVE_OPS)]
    return np.flatnonzero(np.isin(c["name"], ids) & (c["ph"] == ord("X")))


def collectives(traces: dict[int, TorchTrace], steps: dict[int, list[Step]]) -> list[Collective]:
    """Collectives matched over ranks: by ``seq_num`` when every rank's events carry it, else the
    k-th call of a name inside the same step number. Only those seen on at least two ranks."""
    keyed: dict[tuple[Any, ...], Collective] = {}
    for rank, tr in traces.items():
        c = tr.cols
        rows = _collective_rows(tr)
        rows = rows[np.argsort(c["ts_ns"][rows], kind="stable")]
        starts = [s.start_ns for s in steps.get(rank, [])]
        seen: dict[tuple[Any, ...], int] = {}
        for i in rows.tolist():
            name = tr.strings[c["name"][i]]
            ts, dur, seq = int(c["ts_ns"][i]), int(c["dur_ns"][i]), int(c["seq_num"][i])
            if seq >= 0:
                group = int(c["group"][i])
                key: tuple[Any, ...] = ("seq", tr.strings[group] if group >= 0 else "", seq)
            else:
                step = _step_at(steps.get(rank, []), starts, ts)
                base = ("step", step, name)
                seen[base] = seen.get(base, -1) + 1
                key = (*base, seen[base])
            got = keyed.setdefault(key, Collective(key, name, {}, {}))
            got.start_ns[rank], got.end_ns[rank] = ts, ts + max(dur, 0)
    return [m for m in keyed.values() if len(m.start_ns) > 1]


def _step_at(steps: list[Step], starts: list[int], ts: int) -> int | None:
    k = bisect.bisect_right(starts, ts) - 1
    return steps[k].step if k >= 0 and ts < steps[k].end_ns else None
