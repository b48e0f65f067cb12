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
DENSE_STEP_TABLE = 1 << 26      # cells of the (rank, name) table counted densely when looking for the step
_TABLES = ("processes", "threads", "ranges", "marks", "domains", "kernels", "memops", "cuda_api", "osrt")


@dataclass
class Merged:
    """Several parts' timelines as one, and where each part's pids went."""

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
            for (_tl, shift, slope, pivot), (old, new, lut), table in zip(parts, maps, tables):
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
    # rank index of each range's process (-1: not a rank) by a lookup table: merged pids are small
    lut = np.full(max(int(pids.max()), int(r.pid.max())) + 1, -1, dtype=np.int64)
    lut[pids] = np.arange(len(pids))
    pos = lut[r.pid]
    sid = _common_step(tl, pos, len(pids)) if step is None else tl.strings.lookup(step)
    if sid is None or sid < 0:
        return None
    sel = np.flatnonzero((r.name_id == sid) & (pos >= 0))
    start = r.start_ns[sel]
    span = int(start.max()) - int(start.min()) + 1 if len(sel) else 1   # Python ints: no int64 wrap
    if span * len(pids) < 2**62:      # one int64 key (rank, start): a plain sort, faster than lexsort
        key = pos[sel] * span + (start - start.min())
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
    return {"step": tl.strings.values[sid], "ranks": rows, "spread_ns": int(medians.max()) - int(medians.min()),
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


def _common_step(tl: T.Timeline, pos: np.ndarray, n_pids: int) -> int | None:
    """The string id of the range name every rank has twice or more, with the largest total time.

    ``pos``: each range's rank index (-1: not a rank's)."""
    r = tl.ranges
    width = len(tl.strings) + 1                     # name id + 1: -1 (no name) gets a slot of its own
    if not width or not n_pids:
        return None
    key = (pos + 1) * width + (r.name_id.astype(np.int64) + 1)     # pos -1 -> row 0, dropped below
    size = (n_pids + 1) * width
    dur = r.end_ns - r.start_ns
    counts: np.ndarray
    total: np.ndarray
    if size <= DENSE_STEP_TABLE:   # a dense (rank, name) table: two O(n) passes
        counts = np.bincount(key, minlength=size).reshape(n_pids + 1, width)[1:, 1:]
        total = np.bincount(key, weights=dur, minlength=size).reshape(n_pids + 1, width)[1:, 1:]
    else:                     # many ranks times many names: only the pairs that occur
        uniq, inv = np.unique(key, return_inverse=True)
        inv = inv.reshape(-1)
        row, col = uniq // width, uniq % width
        keep = (row > 0) & (col > 0)
        names = np.unique(col[keep])
        counts = np.zeros((n_pids, len(names)), np.int64)
        total = np.zeros((n_pids, len(names)))
        at = (row[keep] - 1, np.searchsorted(names, col[keep]))
        counts[at] = np.bincount(inv, minlength=len(uniq))[keep]
        total[at] = np.bincount(inv, weights=dur, minlength=len(uniq))[keep]
        common = (counts >= 2).all(axis=0)
        if not common.any():
            return None
        return int(names[np.flatnonzero(common)[np.argmax(total.sum(axis=0)[common])]] - 1)
    common = (counts >= 2).all(axis=0)
    if not common.any():
        return None
    return int(np.flatnonzero(common)[np.argmax(total.sum(axis=0)[common])])
