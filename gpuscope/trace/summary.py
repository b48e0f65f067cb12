"""Summaries of a :class:`Timeline` that equal ``nsys stats`` (nvtx_sum, cuda_gpu_kern_sum, …).

The definitions follow NVIDIA's report scripts (docs/NSYS-REPORTS.md, "Summaries"):
total = integer sum, avg = sum / n, median = middle value (mean of the two middle values for even
n), sample standard deviation (0 for n = 1), all rounded like SQLite's ``round(x, 1)`` (half away
from zero on the decimal value), Time (%) over all rows of the report, rows ordered by total.
Computed vectorised over groups; only the (few) output rows are touched in Python.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from decimal import ROUND_HALF_UP, Decimal
from typing import Sequence

import numpy as np

from gpuscope.trace import timeline as T

_TENTH = Decimal("0.1")


def sqlite_round(x: float | int, digits: int = 1) -> float:
    """SQLite's ``round(x, 1)``: half away from zero on the shortest decimal repr of ``x``."""
    x = float(x)
    if not math.isfinite(x) or abs(x) > 4503599627370496.0:
        return x
    q = _TENTH if digits == 1 else Decimal(1).scaleb(-digits)
    return float(Decimal(repr(x)).quantize(q, rounding=ROUND_HALF_UP))


# How a summary row of ranges nsys did not record, taken from gpuscope's own event logs, is marked
# (the app's Source column, the CLI's text); in --json such rows carry "source": "gpuscope".
RECORD_MARK = "from gpuscope's record"


@dataclass
class SummaryRow:
    """One row of a ``*_sum`` report."""

    name: str | None
    count: int
    total_ns: int
    avg_ns: float
    med_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float
    time_pct: float
    style: str | None = None
    grid: str | None = None     # 2022.4 gpukernsum only: "%4d %4d %4d"
    block: str | None = None
    source: str | None = None   # "gpuscope": a row of ranges nsys did not record, from gpuscope's own
                                # records (RECORD_MARK); None: nsys's row, equal to ``nsys stats``

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None or k == "name"}

    @classmethod
    def from_dict(cls, d: dict) -> SummaryRow:
        """The row :meth:`to_dict` made (``gpuscope report --json``'s rows); unknown keys ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class _Groups:
    """Per-group statistics of one summary, one entry per output row."""

    key: np.ndarray      # int64 group key per output row
    count: np.ndarray
    total: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    median: list         # int (odd n) or float (even n), as nsys' median() returns
    stdev: np.ndarray


def unique_counts(values: np.ndarray, inverse: bool = False):
    """Sorted distinct values with their counts[, and each value's index into them].

    One sort (fast on the few distinct values of pid or event-type columns) instead of
    ``np.unique``, whose first call imports ``numpy.ma`` (a visible share of a report's start).
    """
    v = np.asarray(values)
    s = np.sort(v)
    first = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1] if len(s) else np.zeros(0, np.int64)
    uniq = s[first]
    counts = np.diff(np.r_[first, len(s)]) if len(s) else np.zeros(0, np.int64)
    if inverse:
        return uniq, counts, np.searchsorted(uniq, v)
    return uniq, counts


def _sort_pairs(keys: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys, dur) sorted by key, then dur: one sort of a packed int64 when both fit, else lexsort."""
    if len(dur) and int(dur.min()) >= 0:
        kmin, kmax = int(keys.min()), int(keys.max())
        shift = max(1, int(dur.max()).bit_length())
        if (kmax - kmin + 1).bit_length() + shift <= 63:
            packed = ((keys - kmin) << shift) | dur
            packed.sort()
            return (packed >> shift) + kmin, packed & ((1 << shift) - 1)
    order = np.lexsort((dur, keys))
    return keys[order], dur[order]


def group_stats(keys: np.ndarray, dur: np.ndarray) -> _Groups:
    """count/sum/min/max/median/sample-stdev of ``dur`` per distinct ``keys``."""
    keys = np.asarray(keys, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    if len(dur) == 0:
        z = np.zeros(0, dtype=np.int64)
        return _Groups(z, z, z, z, z, [], np.zeros(0))
    k, d = _sort_pairs(keys, dur)
    first = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1]
    count = np.diff(np.r_[first, len(d)])
    total = np.add.reduceat(d, first)
    last = first + count - 1
    mid = first + count // 2
    median = [int(d[m]) if c % 2 else (int(d[m - 1]) + int(d[m])) / 2.0
              for m, c in zip(mid.tolist(), count.tolist())]
    mean = total / count
    dev = d - np.repeat(mean, count)
    ss = np.add.reduceat(dev * dev, first)
    with np.errstate(invalid="ignore", divide="ignore"):
        stdev = np.where(count > 1, np.sqrt(ss / np.maximum(count - 1, 1)), 0.0)
    return _Groups(k[first], count, total, d[first], d[last], median, stdev)


def _rows(g: _Groups, names: Sequence[str | None], styles: Sequence[str | None] | None = None,
          extras: list[dict] | None = None) -> list[SummaryRow]:
    grand = int(g.total.sum())
    rows = []
    for i in range(len(g.key)):
        total, n = int(g.total[i]), int(g.count[i])
        rows.append(SummaryRow(
            name=names[i], count=n, total_ns=total, avg_ns=sqlite_round(total / n),
            med_ns=sqlite_round(g.median[i]), min_ns=int(g.minimum[i]), max_ns=int(g.maximum[i]),
            stddev_ns=sqlite_round(float(g.stdev[i])),
            time_pct=sqlite_round(total * 100.0 / grand) if grand else 0.0,
            style=styles[i] if styles else None, **(extras[i] if extras else {})))
    rows.sort(key=lambda r: (-r.total_ns, r.count, r.name or ""))
    return rows


def source_text(row: SummaryRow) -> str:
    """Who recorded a summary row's ranges, as the app and the CLI show it."""
    return RECORD_MARK if row.source else "nsys"


# --------------------------------------------------------------------------- NVTX

def range_full_names(tl: T.Timeline, naming: str = "plain", source: int = T.SOURCE_NSYS):
    """Per range of ``source``: (final name id into a local list, weight, mask) as nvtx_sum names them.

    ``weight`` is how many domain-create rows of the range's process matched (SQL join semantics:
    a domain created on two threads counts its ranges twice); ranges of an unmatched domain get 1.
    """
    r = tl.ranges
    sel = np.flatnonzero(r.source == source)
    final, inv, weight = full_names(tl.strings, tl.domains, r.pid[sel], r.domain_id[sel], r.name_id[sel], naming)
    return final, inv, weight, sel


def full_names(strings: T.StringTable, d: T.Domains, pid: np.ndarray, domain_id: np.ndarray,
               name_id: np.ndarray, naming: str = "plain"):
    """(distinct final names, index of each range's name, weight) for ranges given by columns."""
    pid, dom = pid.astype(np.int64), domain_id.astype(np.int64)
    dom_name = np.full(len(pid), -1, dtype=np.int64)
    weight = np.ones(len(pid), dtype=np.int64)
    if len(d):
        dkeys = (d.pid.astype(np.int64) << 32) | d.domain_id.astype(np.int64)
        order = np.argsort(dkeys)
        dkeys = dkeys[order]
        q = (pid << 32) | dom
        pos = np.clip(np.searchsorted(dkeys, q), 0, len(dkeys) - 1)
        hit = dkeys[pos] == q
        dom_name[hit] = d.name_id[order][pos[hit]]
        weight[hit] = d.count[order][pos[hit]]
    combo = (dom_name + 1) * (len(strings) + 2) + (name_id.astype(np.int64) + 1)
    uniq, _, inv = unique_counts(combo, inverse=True)
    final: list[str | None] = []
    for c in uniq.tolist():
        dn, tx = c // (len(strings) + 2) - 1, c % (len(strings) + 2) - 1
        dname, tname = strings.get(dn), strings.get(tx)
        if naming == "colon":
            final.append(f"{dname or ''}:{tname or ''}")
        elif dname is not None:
            final.append(None if tname is None else f"{dname}:{tname}")
        else:
            final.append(tname)
    return final, inv.reshape(-1), weight


def nvtx_summary(tl: T.Timeline, naming: str = "plain", source: int | None = T.SOURCE_NSYS) -> list[SummaryRow]:
    """``nsys stats --report nvtx_sum`` (2022.4: ``nvtxsum``) of the ranges of ``source`` (None: all)."""
    r = tl.ranges
    sel = np.arange(len(r.source)) if source is None else np.flatnonzero(r.source == source)
    return nvtx_summary_of(tl.strings, tl.domains, r.pid[sel], r.domain_id[sel], r.name_id[sel],
                           r.style[sel], r.end_ns[sel] - r.start_ns[sel], naming)


def run_nvtx_summary(tl: T.Timeline, naming: str = "plain") -> list[SummaryRow]:
    """The NVTX summary of a run whose timeline adds gpuscope's records of processes nsys missed:
    nsys's rows first, exactly ``nsys stats`` (their Time (%) over nsys's ranges), then the rows of
    gpuscope's records, ``source="gpuscope"`` (their Time (%) over those ranges). Every range the
    timeline draws is counted once; a name in both keeps two rows, so nsys's stay nsys's."""
    own = nvtx_summary(tl, naming, source=T.SOURCE_GPUSCOPE)
    for row in own:
        row.source = T.SOURCE_NAMES[T.SOURCE_GPUSCOPE]
    return nvtx_summary(tl, naming, source=T.SOURCE_NSYS) + own


def nvtx_summary_of(strings: T.StringTable, domains: T.Domains, pid: np.ndarray, domain_id: np.ndarray,
                    name_id: np.ndarray, style: np.ndarray, dur: np.ndarray,
                    naming: str = "plain") -> list[SummaryRow]:
    """nvtx_sum of ranges given as columns (one home for the rule; the summary-only reader uses it)."""
    final, inv, weight = full_names(strings, domains, pid, domain_id, name_id, naming)
    # Group by the final string (two domain/text pairs can print the same) and the style.
    labels = sorted({s for s in final if s is not None})
    label_id = {s: i + 1 for i, s in enumerate(labels)}
    name_key = np.array([label_id.get(s, 0) if s is not None else 0 for s in final], dtype=np.int64)
    keys = name_key[inv] * 2 + style.astype(np.int64) if len(pid) else np.zeros(0, np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    if (weight != 1).any():
        keys, dur = np.repeat(keys, weight), np.repeat(dur, weight)
    g = group_stats(keys, dur)
    names = [labels[k // 2 - 1] if k // 2 else None for k in g.key.tolist()]
    styles = [T.STYLE_NAMES[k % 2] for k in g.key.tolist()]
    return _rows(g, names, styles)


# --------------------------------------------------------------------------- GPU / API / OS runtime

def kernel_summary(tl: T.Timeline, generation: int = 2023) -> list[SummaryRow]:
    """``cuda_gpu_kern_sum`` (2023+: by name) or 2022.4 ``gpukernsum`` (by name, grid, block)."""
    k = tl.kernels
    dur = k.end_ns - k.start_ns
    if generation > 2022 or not len(k):
        return _by_name_id(tl, k.name_id, dur)
    combo = np.concatenate([k.name_id.astype(np.int64)[:, None], k.grid, k.block], axis=1)
    uniq, inv = np.unique(combo, axis=0, return_inverse=True)
    g = group_stats(inv.reshape(-1), dur)
    dims = [uniq[i] for i in g.key.tolist()]
    extras = [{"grid": "%4d %4d %4d" % tuple(u[1:4].tolist()), "block": "%4d %4d %4d" % tuple(u[4:7].tolist())}
              for u in dims]
    return _rows(g, [tl.strings.get(int(u[0])) for u in dims], extras=extras)


def _by_name_id(tl: T.Timeline, name_id: np.ndarray, dur: np.ndarray, rename=None) -> list[SummaryRow]:
    g = group_stats(name_id, dur)
    names = [tl.strings.get(int(i)) for i in g.key.tolist()]
    if rename:
        names = [rename(n) for n in names]
    return _rows(g, names)


def _strip_version(name: str | None) -> str | None:
    """cuda_api_sum drops a trailing ``_vNNNN`` (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``)."""
    if name and len(name) >= 6 and name[-6:-4] == "_v":
        return name[:-6]
    return name


def cuda_api_summary(tl: T.Timeline) -> list[SummaryRow]:
    """``cuda_api_sum``: every CUDA runtime and driver call, grouped by name."""
    c = tl.cuda_api
    return _by_name_id(tl, c.name_id, c.end_ns - c.start_ns, rename=_strip_version)


def osrt_summary(tl: T.Timeline) -> list[SummaryRow]:
    """``osrt_sum``: OS runtime calls (event class 27) grouped by name."""
    c = tl.osrt
    m = c.event_class == 27
    return _by_name_id(tl, c.name_id[m], (c.end_ns - c.start_ns)[m])


def memop_summary(tl: T.Timeline) -> list[SummaryRow]:
    """``cuda_gpu_mem_time_sum``: memcpy/memset time grouped by operation."""
    m = tl.memops
    return _by_name_id(tl, m.name_id, m.end_ns - m.start_ns)


def all_summaries(tl: T.Timeline, naming: str = "plain", generation: int = 2023) -> dict[str, list[SummaryRow]]:
    """Every summary that has data: keys nvtx, kernel, cuda_api, memop, osrt (nvtx/kernel/osrt always)."""
    out = {"nvtx": nvtx_summary(tl, naming), "kernel": kernel_summary(tl, generation),
           "osrt": osrt_summary(tl)}
    if len(tl.cuda_api):
        out["cuda_api"] = cuda_api_summary(tl)
    if len(tl.memops):
        out["memop"] = memop_summary(tl)
    return out


def _counts(pids: np.ndarray) -> dict[int, int]:
    uniq, counts = unique_counts(pids)
    return dict(zip(uniq.tolist(), counts.tolist()))


def process_table(tl: T.Timeline, nvtx_counts: tuple[dict[int, int], dict[int, int]] | None = None) -> list[dict]:
    """One dict per process: pid, name, ranges per source, marks, GPU work, API and OS calls, threads.

    ``nvtx_counts`` = (nsys ranges per pid, marks per pid) when the timeline holds no ranges
    (the summary-only reader).
    """
    r = tl.ranges
    if nvtx_counts is None:
        nvtx_counts = (_counts(r.pid[r.source == T.SOURCE_NSYS]), _counts(tl.marks.pid))
    per = {
        "nvtx_ranges": nvtx_counts[0],
        "gpuscope_ranges": _counts(r.pid[r.source == T.SOURCE_GPUSCOPE]),
        "marks": nvtx_counts[1], "kernels": _counts(tl.kernels.pid),
        "memops": _counts(tl.memops.pid), "cuda_api_calls": _counts(tl.cuda_api.pid),
        "osrt_calls": _counts(tl.osrt.pid), "threads": _counts(tl.threads.pid),
    }
    out = []
    for pid, src in zip(tl.processes.pid.tolist(), tl.processes.source.tolist()):
        row = {"pid": pid, "name": tl.process_name(pid),
               "sources": [n for i, n in enumerate(T.SOURCE_NAMES) if src & (1 << i)]}
        row.update({k: v.get(pid, 0) for k, v in per.items()})
        out.append(row)
    return out
