"""Questions the timeline view asks of a Timeline (numpy only, no Qt): which items carry a name,
what a measured time span holds.

Names are the ones the summary tables print (``gpuscope.trace.summary.full_names``, "plain"
naming): a range of a named NVTX domain is ``domain:name`` (gpuscope's pool-task range of ``work``
is ``gpuscope:work``), a default-domain range its own text (the script's ``work``). The timeline
labels, colours, highlights and measures by these names, so one name is one label and one colour
in nsys and non-nsys reports alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscope.trace import summary as S
from gpuscope.trace import timeline as T

# The tables the timeline draws, as (key, its name in a details dict / summary tab).
TABLES = ("ranges", "kernels", "memops", "cuda_api", "osrt")
SUMMARY_TABLE = {"nvtx": "ranges", "kernel": "kernels", "memop": "memops", "cuda_api": "cuda_api", "osrt": "osrt"}


@dataclass
class RangeNames:
    """Per NVTX range: ``ids[i]`` indexes ``names`` (the range's full name; None when it has none)."""

    names: list[str | None]
    ids: np.ndarray


def range_names(tl: T.Timeline, naming: str = "plain") -> RangeNames:
    """Every range's full name as the NVTX summary prints it (``naming``: the report's rule)."""
    r = tl.ranges
    if not len(r):
        return RangeNames([], np.zeros(0, np.int32))
    final, inv, _ = S.full_names(tl.strings, tl.domains, r.pid, r.domain_id, r.name_id, naming)
    return RangeNames(list(final), np.asarray(inv, dtype=np.int32))


def item_names(tl: T.Timeline, table: str, names: RangeNames | None = None) -> tuple[list[str], np.ndarray]:
    """(distinct names, index per item) of one table, named as its summary names them."""
    if table == "ranges":
        rn = names or range_names(tl)
        return [n if n is not None else "(unnamed)" for n in rn.names], rn.ids
    tab = getattr(tl, table)
    ids = tab.name_id.astype(np.int64)    # kernels: the demangled name, as cuda_gpu_kern_sum
    uniq, inv = np.unique(ids, return_inverse=True) if len(ids) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    text = [tl.strings.get(int(u)) or "(unnamed)" for u in uniq.tolist()]
    if table == "cuda_api":
        text = [S._strip_version(t) or t for t in text]   # cuda_api_sum's rule (cudaLaunchKernel_v7000 -> …)
    return text, inv.reshape(-1).astype(np.int32)


def matching(tl: T.Timeline, summary_key: str, name: str, naming: str = "plain",
             plain: RangeNames | None = None) -> tuple[str, np.ndarray]:
    """(table, indexes of its items) named ``name`` in the summary tab ``summary_key``
    (``nvtx``, ``kernel``, ``memop``, ``cuda_api``, ``osrt``); ``plain``: the ranges' names under
    the "plain" rule when already known."""
    table = SUMMARY_TABLE.get(summary_key)
    if table is None:
        return "ranges", np.zeros(0, np.int64)
    rn = None
    if table == "ranges":
        rn = plain if plain is not None and naming == "plain" else range_names(tl, naming)
    names, ids = item_names(tl, table, rn)
    hit = [i for i, n in enumerate(names) if n == name]
    if not hit:
        return table, np.zeros(0, np.int64)
    index = np.flatnonzero(np.isin(ids, hit)).astype(np.int64)
    if table == "ranges":   # the NVTX summary's rows: not the PyTorch profiler's events
        index = index[tl.ranges.source[index] != T.SOURCE_TORCH]
    return table, index


def longest(tl: T.Timeline, table: str, index: np.ndarray) -> int:
    """The item (of ``index``) with the longest duration; -1 if none."""
    if not len(index):
        return -1
    tab = getattr(tl, table)
    dur = tab.end_ns[index] - tab.start_ns[index]
    return int(index[int(np.argmax(dur))])


@dataclass
class MeasureRow:
    """One name's items inside a measured span: count, time inside it, whole time."""

    kind: str          # "nvtx", "torch", "kernel", "memop", "cuda_api", "osrt"
    name: str
    count: int         # items that overlap the span
    inside_ns: int     # their time inside the span (clipped to it)
    total_ns: int      # their whole durations


@dataclass
class Measure:
    """A measured span of the timeline and, per name, what lies inside it."""

    t0: int
    t1: int
    rows: list[MeasureRow]

    @property
    def duration_ns(self) -> int:
        return self.t1 - self.t0


_KIND = {"ranges": "nvtx", "kernels": "kernel", "memops": "memop", "cuda_api": "cuda_api", "osrt": "osrt"}


def measure(tl: T.Timeline, t0: float, t1: float, names: RangeNames | None = None) -> Measure:
    """What the span [t0, t1] holds: per kind and name, the items that overlap it, their time
    inside it and their whole durations; rows by time inside, longest first."""
    a, b = int(round(min(t0, t1))), int(round(max(t0, t1)))
    rows: list[MeasureRow] = []
    for table in TABLES:
        tab = getattr(tl, table)
        if not len(tab):
            continue
        hit = np.flatnonzero((tab.start_ns <= b) & (tab.end_ns >= a))
        if not len(hit):
            continue
        text, ids = item_names(tl, table, names if table == "ranges" else None)
        groups = [(_KIND[table], hit)]
        if table == "ranges":   # the PyTorch profiler's events apart from NVTX ranges
            torch = tab.source[hit] == T.SOURCE_TORCH
            groups = [("nvtx", hit[~torch]), ("torch", hit[torch])]
        for kind, sel in groups:
            s, e = tab.start_ns[sel], tab.end_ns[sel]
            inside = np.minimum(e, b) - np.maximum(s, a)
            k = ids[sel]
            count = np.bincount(k, minlength=len(text))
            ins = np.bincount(k, weights=inside, minlength=len(text))
            tot = np.bincount(k, weights=e - s, minlength=len(text))
            for j in np.flatnonzero(count).tolist():
                rows.append(MeasureRow(kind, text[j], int(count[j]), int(ins[j]), int(tot[j])))
    rows.sort(key=lambda r: (-r.inside_ns, -r.count, r.name))
    return Measure(a, b, rows)
