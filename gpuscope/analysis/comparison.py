"""Compare two runs side by side (e.g. the same script under fork and under spawn).

Everything is computed from what the runs recorded: the store's summary (wall time, per-process
CPU and memory) and each run's event logs (process start-up, ranges per name).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscope.trace.process_row import as_row
from gpuscope.trace.events import ProcessEvents, read_run_events


@dataclass(frozen=True)
class RangeStats:
    count: int
    total_ns: int

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0


@dataclass
class RunFigures:
    """What one run looks like, as numbers that can be set beside another run's."""

    run_id: str
    label: str
    duration_s: float | None
    status: str
    processes: dict[str, int] = field(default_factory=dict)          # role -> count
    child_startup_ms: float | None = None    # median: parent start -> child's first line of Python,
                                             # gpuscope's hook before that moment left out
    hook_ms: float | None = None             # median: gpuscope's hook in each child's start (its own share)
    first_task_ms: float | None = None       # median: child start -> its first range
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None        # sum of the processes' peaks
    sampled: list[str] = field(default_factory=list)   # figures some process had only sampled ("CPU", "RSS")
    ranges: dict[str, RangeStats] = field(default_factory=dict)


def _roles(logs: list[ProcessEvents]) -> dict[str, int]:
    out: dict[str, int] = {}
    for pe in logs:
        out[pe.role] = out.get(pe.role, 0) + 1
    return out


def _range_stats(logs: list[ProcessEvents]) -> dict[str, RangeStats]:
    acc: dict[str, list[int]] = {}
    for pe in logs:
        r = pe.ranges
        if not len(r):
            continue
        dur = r["t1"] - r["t0"]
        for nid in np.unique(r["nid"]):
            sel = r["nid"] == nid
            entry = acc.setdefault(pe.label(int(nid)), [0, 0])
            entry[0] += int(sel.sum())
            entry[1] += int(dur[sel].sum())
    return {name: RangeStats(c, t) for name, (c, t) in acc.items()}


def figures(run_id: str, run_dir: str | Path, summary: dict[str, Any] | None, label: str) -> RunFigures:
    logs = read_run_events(run_dir)
    starts = {pe.pid: pe.start_ns for pe in logs}
    children = [pe for pe in logs if pe.ppid in starts and pe.role not in ("main", "torchrun agent")]
    startup = [(pe.start_ns - starts[pe.ppid] - _int(pe.info.get("hook_before_anchor_ns"))) / 1e6 for pe in children]
    hook = [_int(pe.info.get("hook_ns")) / 1e6 for pe in children if pe.info.get("hook_ns") is not None]
    first = [(int(pe.ranges["t0"].min()) - pe.start_ns) / 1e6 for pe in children if len(pe.ranges)]
    procs = [as_row(p) for p in (summary or {}).get("processes", [])]
    cpu = [p.cpu_seconds for p in procs if p.cpu_seconds is not None]
    rss = [p.peak_rss_bytes for p in procs if p.peak_rss_bytes is not None]
    return RunFigures(
        run_id=run_id, label=label, duration_s=(summary or {}).get("duration_s"),
        status=(summary or {}).get("status", "?"), processes=_roles(logs),
        child_startup_ms=statistics.median(startup) if startup else None,
        hook_ms=statistics.median(hook) if hook else None,
        first_task_ms=statistics.median(first) if first else None,
        cpu_seconds=round(sum(cpu), 3) if cpu else None, peak_rss_bytes=sum(rss) if rss else None,
        sampled=sorted({f for p in procs for f, src in (("CPU", p.cpu_source), ("RSS", p.rss_source))
                        if src == "sampled"}),
        ranges=_range_stats(logs),
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a


def range_rows(a: RunFigures, b: RunFigures) -> list[dict[str, Any]]:
    """Per range name: count, total and mean in both runs, and B's total over A's."""
    rows = []
    for name in sorted(set(a.ranges) | set(b.ranges)):
        ra, rb = a.ranges.get(name), b.ranges.get(name)
        rows.append({
            "name": name,
            "a_count": ra.count if ra else 0, "b_count": rb.count if rb else 0,
            "a_total_ns": ra.total_ns if ra else 0, "b_total_ns": rb.total_ns if rb else 0,
            "a_avg_ns": ra.avg_ns if ra else None, "b_avg_ns": rb.avg_ns if rb else None,
            "ratio": ratio(ra.total_ns if ra else None, rb.total_ns if rb else None),
        })
    rows.sort(key=lambda r: -max(r["a_total_ns"], r["b_total_ns"]))
    return rows
