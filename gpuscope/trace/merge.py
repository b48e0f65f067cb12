"""Several timelines (one per node of a job) as one: times moved onto one clock, pids made unique.

Each part comes with ``shift_ns`` (added to every time of the part: its own base and clock offset
moved onto the merged timeline's base) and is given a block of new pids: pids of different hosts
may be equal, so the merged timeline numbers processes 1, 2, ... part after part, and
``pid_of[(part, pid)]`` says which new pid a process got. Strings are re-interned into one table.
Ranges keep their nesting depths (depth is per process and thread, which the merge keeps apart).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from gpuscope.trace import timeline as T

_TIME_COLUMNS = ("start_ns", "end_ns")
_STRING_COLUMNS = ("name_id", "short_name_id")
_TABLES = ("processes", "threads", "ranges", "marks", "domains", "kernels", "memops", "cuda_api", "osrt")


@dataclass
class Merged:
    timeline: T.Timeline
    pid_of: dict[tuple[int, int], int]     # (part index, original pid) -> merged pid


def _pids(tl: T.Timeline) -> np.ndarray:
    cols = [getattr(tl, t).pid for t in _TABLES] + [tl.nvtx_pids]
    return np.unique(np.concatenate([np.asarray(c, np.int64) for c in cols])) if cols else np.zeros(0, np.int64)


def merge(parts: list[tuple]) -> Merged:
    """``parts``: (timeline, shift_ns) or (timeline, shift_ns, slope, pivot_ns) each; a time ``t`` of a
    part becomes ``t + shift - slope * (t - pivot)`` (``slope``: a clock's drift, corrected linearly).

    Each column of the result is allocated once and every part written into its slice (shifted,
    renumbered, re-interned on the way): one copy of the data, not one per step."""
    out = T.Timeline()
    pid_of: dict[tuple[int, int], int] = {}
    maps = []                              # per part: (old pids sorted, new pids, string id lut)
    next_pid = 1
    parts = [(p[0], int(p[1]), float(p[2]) if len(p) > 2 else 0.0, int(p[3]) if len(p) > 3 else 0) for p in parts]
    for index, (tl, *_rest) in enumerate(parts):
        old = _pids(tl)
        new = np.arange(next_pid, next_pid + len(old), dtype=np.int64)
        next_pid += len(old)
        pid_of.update({(index, int(o)): int(n) for o, n in zip(old.tolist(), new.tolist())})
        lut = np.array([out.strings.intern(s) for s in tl.strings.values] or [0], dtype=np.int32)
        maps.append((old, new, lut))
    for name in _TABLES:
        tables = [getattr(tl, name) for tl, *_ in parts]
        total = sum(len(t) for t in tables)
        cls = type(getattr(out, name))
        if not total:
            continue
        cols = {}
        for f in fields(cls):
            first = next(getattr(t, f.name) for t in tables if len(t))
            dest = np.empty((total, *first.shape[1:]), dtype=first.dtype)
            at = 0
            for (tl, shift, slope, pivot), (old, new, lut), table in zip(parts, maps, tables):
                n = len(table)
                if not n:
                    continue
                v, d = getattr(table, f.name), dest[at:at + n]
                if f.name in _TIME_COLUMNS:
                    np.add(v, np.int64(shift), out=d)
                    if slope:
                        d -= np.rint((v - np.int64(pivot)) * slope).astype(np.int64)
                elif f.name == "pid":
                    d[...] = new[np.searchsorted(old, v)]
                elif f.name in _STRING_COLUMNS:
                    d[...] = np.where(v >= 0, lut[np.clip(v, 0, None)], -1)
                else:
                    d[...] = v
                at += n
            cols[f.name] = dest
        setattr(out, name, cls(**cols))
    nvtx = [new[np.searchsorted(old, tl.nvtx_pids)] for (tl, *_), (old, new, _) in zip(parts, maps)
            if len(tl.nvtx_pids)]
    out.nvtx_pids = np.concatenate(nvtx).astype(np.int32) if nvtx else np.zeros(0, np.int32)
    ends = [int(tl.duration_ns) + shift for tl, shift, *_ in parts if tl.duration_ns is not None]
    last = [int(tl.nvtx_last_ns) + shift for tl, shift, *_ in parts if tl.nvtx_last_ns is not None]
    out.duration_ns = max(ends) if ends else None
    out.nvtx_last_ns = max(last) if last else None
    out.notes = [n for tl, *_ in parts for n in tl.notes]
    return Merged(out, pid_of)


def step_stats(tl: T.Timeline, pid_rank: dict[int, int], step: str | None = None) -> dict | None:
    """Stragglers: per rank, the durations of one repeated range (the step), and their spread.

    ``step`` None: the range name every rank has at least twice with the largest total time.
    Returns None when no range name is common to all ranks (or ``step`` is not a range name).
    """
    r = tl.ranges
    if not pid_rank or not len(r):
        return None
    pids = np.array(sorted(pid_rank), dtype=np.int64)
    pos = np.clip(np.searchsorted(pids, r.pid), 0, len(pids) - 1)
    of_rank = (pids[pos] == r.pid) & (r.name_id >= 0)
    sid = _common_step(tl, pos, of_rank, len(pids)) if step is None else tl.strings.lookup(step)
    if sid is None or sid < 0:
        return None
    sel = np.flatnonzero(of_rank & (r.name_id == sid))
    start = r.start_ns[sel]
    span = int(start.max() - start.min()) + 1 if len(sel) else 1
    if span * len(pids) < 2**62:      # one int64 key (rank, start): a plain sort, faster than lexsort
        key = pos[sel].astype(np.int64) * span + (start - start.min())
        # event logs come per process in start order: then the selection is in order already
        order = sel if bool((key[1:] >= key[:-1]).all()) else sel[np.argsort(key, kind="stable")]
    else:
        order = sel[np.lexsort((start, pos[sel]))]
    which = pos[order]
    cuts = np.flatnonzero(np.diff(which)) + 1
    rows, ends_by_rank = [], {}
    for chunk in np.split(order, cuts) if len(order) else []:
        rank = pid_rank[int(pids[pos[chunk[0]]])]
        dur = (r.end_ns[chunk] - r.start_ns[chunk]).astype(np.int64)
        ends_by_rank[rank] = r.end_ns[chunk]
        rows.append({"rank": rank, "count": int(len(dur)), "median_ns": int(np.median(dur)),
                     "mean_ns": int(dur.mean()), "max_ns": int(dur.max()), "total_ns": int(dur.sum())})
    if not rows:
        return None
    rows.sort(key=lambda x: x["rank"])
    medians = np.array([x["median_ns"] for x in rows], dtype=np.int64)
    slow, fast = rows[int(medians.argmax())], rows[int(medians.argmin())]
    n = min(len(e) for e in ends_by_rank.values())
    skew = None
    if n and len(ends_by_rank) > 1:      # the k-th step of every rank: how far apart their ends are
        ends = np.stack([e[:n] for e in ends_by_rank.values()])
        skew = int(np.median(ends.max(axis=0) - ends.min(axis=0)))
    return {"step": tl.strings.values[sid], "ranks": rows, "spread_ns": int(medians.max() - medians.min()),
            "slowest_rank": slow["rank"], "fastest_rank": fast["rank"],
            "slowest_over_fastest": round(slow["median_ns"] / max(fast["median_ns"], 1), 3),
            "end_skew_median_ns": skew}


def pid_extents(tl: T.Timeline) -> dict[int, tuple[int, int, int]]:
    """pid -> (ranges, first start, last end) over all ranges, in one pass (no mask per process)."""
    r = tl.ranges
    if not len(r):
        return {}
    pids, inv = np.unique(r.pid, return_inverse=True)
    inv = inv.reshape(-1)
    first = np.full(len(pids), np.iinfo(np.int64).max, np.int64)
    last = np.full(len(pids), np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, inv, r.start_ns)
    np.maximum.at(last, inv, r.end_ns)
    counts = np.bincount(inv, minlength=len(pids))
    return {int(p): (int(c), int(f), int(e)) for p, c, f, e in zip(pids.tolist(), counts.tolist(), first.tolist(),
                                                                    last.tolist())}


def _common_step(tl: T.Timeline, pos: np.ndarray, of_rank: np.ndarray, n_pids: int) -> int | None:
    """The string id of the range name every rank has twice or more, with the largest total time."""
    r = tl.ranges
    width = len(tl.strings)
    if not of_rank.any() or not width:
        return None
    key = pos[of_rank].astype(np.int64) * width + r.name_id[of_rank]
    counts = np.bincount(key, minlength=n_pids * width).reshape(n_pids, width)
    total = np.bincount(key, weights=(r.end_ns[of_rank] - r.start_ns[of_rank]).astype(np.float64),
                        minlength=n_pids * width).reshape(n_pids, width).sum(axis=0)
    common = (counts >= 2).all(axis=0)
    if not common.any():
        return None
    return int(np.flatnonzero(common)[np.argmax(total[common])])
