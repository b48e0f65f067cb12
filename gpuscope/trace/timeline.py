"""The columnar ``Timeline``: processes, threads, NVTX ranges and marks, GPU work, OS runtime calls.

Every table is a small class of equal-length numpy columns (int64 times, int32 ids, uint32
colours, uint8 flags); strings live once in a :class:`StringTable` and rows hold indexes into it
(``-1`` = no string). Times are ns on the timeline's own base: for an nsys export the session
timeline (``t = 0`` at session start), for gpuscope event logs ``t = monotonic - mono_base_ns``.
``wall_base_ns`` / ``mono_base_ns`` map a timeline time to wall-clock / CLOCK_MONOTONIC ns.

Nothing here knows about SQLite or event logs: readers (``gpuscope.nsys.reader``,
``gpuscope.trace.coverage``) fill it; summaries, Perfetto export and the app read it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import Iterable

import numpy as np

_nesting: ModuleType | None
try:
    from gpuscope.trace import _nesting  # type: ignore[attr-defined,no-redef]
except ImportError:   # not built (no C compiler at install time): nesting_depth's numpy steps
    _nesting = None

# Range/mark sources.
SOURCE_NSYS = 0
SOURCE_GPUSCOPE = 1
SOURCE_TORCH = 2          # a PyTorch profiler trace of the run (gpuscope.views.torch_ops adds them)
SOURCE_PYSPY = 3          # py-spy's sampled stacks of an attached run (gpuscope.views.attach_flame adds them)
SOURCE_NAMES = ("nsys", "gpuscope", "torch", "cpu samples")

# Range styles (nsys eventType 59/70 -> push/pop, 60/71 -> start/end).
STYLE_PUSHPOP = 0
STYLE_STARTEND = 1
STYLE_NAMES = ("PushPop", "StartEnd")

# Range flags.
FLAG_END_MISSING = 1      # the export had no end: end_ns was filled with the last NVTX timestamp
FLAG_OTHER_THREAD = 2     # a start/end range ended on another thread (end_tid says which)

# GPU memory operation kinds.
MEMOP_MEMCPY = 0
MEMOP_MEMSET = 1


class StringTable:
    """Interned strings: ``ids[s]`` is the index of ``s`` in ``values``."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values: list[str] = []
        self._ids: dict[str, int] = {}
        for v in values:
            self.intern(v)

    def intern(self, value: str | None) -> int:
        """The id of ``value`` (added if new); ``-1`` for None."""
        if value is None:
            return -1
        sid = self._ids.get(value)
        if sid is None:
            sid = len(self.values)
            self.values.append(value)
            self._ids[value] = sid
        return sid

    def get(self, sid: int) -> str | None:
        return self.values[sid] if sid >= 0 else None

    def lookup(self, value: str) -> int:
        """The id of an existing string, or ``-1``."""
        return self._ids.get(value, -1)

    def __len__(self) -> int:
        return len(self.values)

    def nbytes(self) -> int:
        """Approximate memory of the strings themselves (UTF-8 length + per-object overhead)."""
        return sum(len(s) + 50 for s in self.values) * 2


@dataclass
class Columns:
    """Base for tables of equal-length numpy columns (subclasses are dataclasses)."""

    def __len__(self) -> int:
        first = fields(self)[0]
        return int(len(getattr(self, first.name)))

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def take(self, index: np.ndarray):
        """A new table with the rows selected by ``index`` (an int array or a bool mask)."""
        return type(self)(**{k: v[index] for k, v in self.columns().items()})

    def nbytes(self) -> int:
        return sum(int(v.nbytes) for v in self.columns().values())

    @classmethod
    def empty(cls):
        return cls(**{f.name: np.zeros(0, dtype=_DTYPES[f.name]) for f in fields(cls)})

    @classmethod
    def concat(cls, parts: list):
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})


# dtype of every column name used below (one name, one dtype everywhere).
_DTYPES: dict[str, type] = {
    "pid": np.int32, "tid": np.int32, "name_id": np.int32, "source": np.uint8,
    "start_ns": np.int64, "end_ns": np.int64, "depth": np.int16, "color": np.uint32,
    "domain_id": np.int32, "style": np.uint8, "flags": np.uint8, "end_tid": np.int32,
    "category": np.int32, "count": np.int32, "device": np.int32, "context": np.int32,
    "stream": np.int32, "correlation": np.int64, "short_name_id": np.int32,
    "grid": np.int32, "block": np.int32, "kind": np.uint8, "copy_kind": np.int32, "src_kind": np.int32,
    "dst_kind": np.int32,
    "bytes": np.int64, "event_class": np.int32,
}


def column(name: str, values) -> np.ndarray:
    """``values`` as the canonical dtype of column ``name``."""
    return np.asarray(values, dtype=_DTYPES[name])


@dataclass
class Processes(Columns):
    """The processes a timeline holds, and which sources saw them."""

    pid: np.ndarray
    name_id: np.ndarray
    source: np.ndarray     # bit mask: 1 << SOURCE_NSYS | 1 << SOURCE_GPUSCOPE


@dataclass
class Threads(Columns):
    """Threads by process, with their names."""

    pid: np.ndarray
    tid: np.ndarray
    name_id: np.ndarray


@dataclass
class Ranges(Columns):
    """NVTX ranges (push/pop and start/end), from nsys or from gpuscope's own logs."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    depth: np.ndarray      # nesting depth within (source, pid, tid, style), 0 = outermost
    name_id: np.ndarray    # message (-1 if none)
    color: np.ndarray      # ARGB
    domain_id: np.ndarray  # raw NVTX domain id in its process (0 = default); see Timeline.domains
    category: np.ndarray
    style: np.ndarray
    source: np.ndarray
    flags: np.ndarray
    end_tid: np.ndarray    # thread that ended a start/end range when not the starting one, else -1


@dataclass
class Marks(Columns):
    """NVTX marks (instants)."""

    start_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name_id: np.ndarray
    color: np.ndarray
    domain_id: np.ndarray
    source: np.ndarray


@dataclass
class Domains(Columns):
    """NVTX domains created per process: (pid, domain_id) -> name.

    ``count`` is how many threads of the process created it (nsys stats joins on the process, so
    a domain created on two threads counts each of its ranges twice; summaries reproduce that).
    """

    pid: np.ndarray
    domain_id: np.ndarray
    name_id: np.ndarray
    count: np.ndarray


@dataclass
class Kernels(Columns):
    """CUDA kernels as the GPU ran them."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    context: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    name_id: np.ndarray        # demangled name
    short_name_id: np.ndarray  # base name
    grid: np.ndarray           # (n, 3) grid x/y/z
    block: np.ndarray          # (n, 3) block x/y/z


@dataclass
class MemOps(Columns):
    """CUDA memory copies and sets."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    context: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    kind: np.ndarray       # MEMOP_MEMCPY / MEMOP_MEMSET
    copy_kind: np.ndarray  # ENUM_CUDA_MEMCPY_OPER id (memcpy), -1 for memset
    src_kind: np.ndarray   # ENUM_CUDA_MEM_KIND id of the source, -1 when not exported or a memset
    dst_kind: np.ndarray   # ENUM_CUDA_MEM_KIND id of the destination (or of a memset's memory), -1 when absent
    bytes: np.ndarray
    name_id: np.ndarray    # "[CUDA memcpy Host-to-Device]" etc., named as the version's nsys stats does


@dataclass
class Calls(Columns):
    """CPU-side API calls: CUDA runtime/driver API or OS runtime."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name_id: np.ndarray
    event_class: np.ndarray
    correlation: np.ndarray


@dataclass
class Timeline:
    """Everything one report (or one gpuscope run) holds, as columns."""

    strings: StringTable = field(default_factory=StringTable)
    processes: Processes = field(default_factory=Processes.empty)
    threads: Threads = field(default_factory=Threads.empty)
    ranges: Ranges = field(default_factory=Ranges.empty)
    marks: Marks = field(default_factory=Marks.empty)
    domains: Domains = field(default_factory=Domains.empty)
    kernels: Kernels = field(default_factory=Kernels.empty)
    memops: MemOps = field(default_factory=MemOps.empty)
    cuda_api: Calls = field(default_factory=Calls.empty)
    osrt: Calls = field(default_factory=Calls.empty)
    wall_base_ns: int | None = None   # wall-clock ns of t = 0
    mono_base_ns: int | None = None   # CLOCK_MONOTONIC ns of t = 0, when known
    duration_ns: int | None = None
    nvtx_last_ns: int | None = None   # nsys stats' "M": the latest NVTX timestamp of the export
    nvtx_pids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # pids with any NVTX row
    notes: list[str] = field(default_factory=list)
    # pid -> lane group (a job across nodes: "node 1 · host"); empty for one machine. Not cached.
    groups: dict[int, str] = field(default_factory=dict)
    # Rows of PyTorch profiler traces, appended after the report is read (not cached): table ->
    # its first such row (kernels), and pid -> how that process's trace was put on this clock.
    torch_rows: dict[str, int] = field(default_factory=dict)
    torch_clocks: dict[int, str] = field(default_factory=dict)

    def nbytes(self) -> int:
        """Memory held by all columns (strings not included)."""
        tables = (self.processes, self.threads, self.ranges, self.marks, self.domains,
                  self.kernels, self.memops, self.cuda_api, self.osrt)
        return sum(t.nbytes() for t in tables)

    def name(self, sid: int) -> str | None:
        return self.strings.get(int(sid))

    def process_name(self, pid: int) -> str:
        hit = np.flatnonzero(self.processes.pid == pid)
        if len(hit) and self.processes.name_id[hit[0]] >= 0:
            return self.strings.values[int(self.processes.name_id[hit[0]])]
        return f"pid {pid}"

    def range_counts(self, source: int | None = None) -> dict[int, int]:
        """Number of ranges per pid (of one source, or all)."""
        pids = self.ranges.pid if source is None else self.ranges.pid[self.ranges.source == source]
        uniq, counts = np.unique(pids, return_counts=True)
        return {int(p): int(c) for p, c in zip(uniq, counts)}

    def domain_names(self) -> dict[tuple[int, int], str]:
        d = self.domains
        return {(int(p), int(i)): self.strings.values[int(n)]
                for p, i, n in zip(d.pid, d.domain_id, d.name_id) if n >= 0}


def nesting_depth(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each interval among the intervals of its group, vectorised (== a per-thread stack).

    Intervals are visited by (start, longest first), as a push/pop stack would see them:
    depth = (intervals of the group visited before this one)
          - (those that ended at or before this one's start)
          + (zero-length intervals at this start not visited yet: counted as ended, yet not pushed).
    Exact for properly nested intervals (push/pop); for overlapping start/end ranges it is the
    number of intervals still open, a usable lane.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int16)
    group = np.ascontiguousarray(group, dtype=np.int64)
    start = np.ascontiguousarray(start, dtype=np.int64)
    end = np.ascontiguousarray(end, dtype=np.int64)
    if _nesting is not None and not os.environ.get("GPUSCOPE_NO_COMPILED"):
        # The compiled walk (_nesting.c): one stable sort by (group, start) here, then a heap of
        # open ends per group; the same depths as below for intervals that end at or after they
        # start (tested), at a fraction of the CPU.
        out = np.empty(n, dtype=np.int16)
        _nesting.depths(_group_start_order(group, start), start, end, group, out)
        return out
    order = np.lexsort((-end, start, group))
    gs, ss = group[order], start[order]
    new_group = np.r_[True, gs[1:] != gs[:-1]]
    first = np.flatnonzero(new_group)
    rank = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    # Ends <= start within the group: one sorted int64 key (group, time) and a binary search.
    s_key, e_key, g_key = _group_time_keys(group, start, end)
    end_keys = np.sort(e_key)
    ended = np.searchsorted(end_keys, s_key, side="right") - np.searchsorted(end_keys, g_key, side="left")
    # Zero-length intervals at the same (group, start), at or after this position in the visit order.
    block = np.flatnonzero(new_group | np.r_[True, ss[1:] != ss[:-1]])
    block_last = np.repeat(np.r_[block[1:], n] - 1, np.diff(np.r_[block, n]))
    zero = (end[order] == ss).astype(np.int64)
    cz = np.cumsum(zero)
    pending = cz[block_last] - (cz - zero)
    depth = np.empty(n, dtype=np.int64)
    depth[order] = rank - ended[order] + pending
    np.clip(depth, 0, np.iinfo(np.int16).max, out=depth)
    return depth.astype(np.int16)


def _group_start_order(group: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Row indices (int64) sorted by (group, start), stable: one packed key when it fits."""
    lo = int(start.min())
    width = int(start.max()) - lo + 1
    if (int(group.max()) + 1) * width < 2**62:
        order = np.argsort(group * np.int64(width) + (start - lo), kind="stable")
    else:
        order = np.lexsort((start, group))
    return order.astype(np.int64, copy=False)


def _group_time_keys(group: np.ndarray, start: np.ndarray, end: np.ndarray):
    """int64 keys ordering (group, time) for starts, ends and each group's lowest possible key."""
    lo = int(min(start.min(), end.min()))
    width = int(max(start.max(), end.max())) - lo + 1
    if (int(group.max()) + 1) * width < 2**62:
        base = group * np.int64(width)
        return base + (start - lo), base + (end - lo), base
    # Huge time spans: number the distinct times first (slower, exact).
    _, inv = np.unique(np.concatenate([start, end]), return_inverse=True)
    n, w = len(start), np.int64(len(inv) + 1)
    return group * w + inv[:n], group * w + inv[n:], group * w


def thread_groups(*keys: np.ndarray) -> np.ndarray:
    """A compact int64 group id per row for the combination of small non-negative key columns.

    At most three keys: 24 bits each for the last two (pid and tid), the first above them;
    packed into one int64, then numbered with a 1-D ``np.unique``.
    """
    if len(keys[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for k in keys:
        packed = (packed << 24) | (np.asarray(k, dtype=np.int64) & 0xFFFFFF)
    _, inv = np.unique(packed, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)


def compute_depths(r: Ranges) -> None:
    """Fill ``r.depth`` per (source, pid, tid, style)."""
    lane = r.source.astype(np.int64) * 2 + r.style
    group = thread_groups(lane, r.pid, r.tid)
    r.depth = nesting_depth(group, r.start_ns, r.end_ns)


# --------------------------------------------------------------------------- save / load (.npz)

CACHE_FORMAT = 2
_TABLES = ("processes", "threads", "ranges", "marks", "domains", "kernels", "memops", "cuda_api", "osrt")
_SCALARS = ("wall_base_ns", "mono_base_ns", "duration_ns", "nvtx_last_ns")


def save(tl: Timeline, path, extra: dict | None = None) -> None:
    """Write ``tl`` (and a JSON-able ``extra``) to an uncompressed .npz file."""
    arrays = {f"{t}.{k}": v for t in _TABLES for k, v in getattr(tl, t).columns().items()}
    meta = {"format": CACHE_FORMAT, "scalars": {k: getattr(tl, k) for k in _SCALARS},
            "notes": tl.notes, "extra": extra or {}}
    arrays["nvtx_pids"] = tl.nvtx_pids
    encoded = [v.encode("utf-8", "surrogatepass") for v in tl.strings.values]
    arrays["strings"] = np.frombuffer(b"".join(encoded), np.uint8)
    arrays["string_ends"] = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def load_meta(path) -> tuple[dict, list[str]]:
    """(extra, notes) of a file written by :func:`save`, without reading the columns."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
    if meta.get("format") != CACHE_FORMAT:
        raise ValueError("old cache format")
    return meta["extra"], list(meta["notes"])


def load(path) -> tuple[Timeline, dict]:
    """Read a Timeline written by :func:`save`; returns (timeline, extra). Raises ValueError if stale."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        if meta.get("format") != CACHE_FORMAT:
            raise ValueError("old cache format")
        blob, ends = z["strings"].tobytes(), z["string_ends"].tolist()
        starts = [0] + ends[:-1]
        tl = Timeline(strings=StringTable(blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends)))
        for t in _TABLES:
            cls = type(getattr(tl, t))
            setattr(tl, t, cls(**{f.name: z[f"{t}.{f.name}"] for f in fields(cls)}))
        tl.nvtx_pids = z["nvtx_pids"]
    for k, v in meta["scalars"].items():
        setattr(tl, k, v)
    tl.notes = list(meta["notes"])
    return tl, meta["extra"]
