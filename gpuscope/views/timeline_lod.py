"""Lanes and level of detail for the timeline view (numpy only, no Qt).

A :class:`TimelineLayout` turns a :class:`~gpuscope.trace.timeline.Timeline` into rows that a
painter can draw quickly at any zoom:

* one *lane* per (process, thread, source, style) for NVTX ranges, with one *row* per nesting
  depth; one lane per thread for its CUDA API calls; one lane per (process, device, stream) for
  kernels and memory operations;
* per row, the items sorted by start, with a running maximum of their ends (so the first item
  that reaches into a view is one ``searchsorted`` away);
* per row, a pyramid of coarser levels: at level ``k`` neighbouring items shorter than
  ``g_k = BASE_NS * 4**k`` and less than ``g_k`` apart are merged into one block. A view that
  shows ``p`` ns per pixel draws the coarsest level with ``g_k <= p``: everything merged there
  was narrower than a pixel, and the blocks left are few (about ``8 × width`` per row at worst).
  A block keeps its items' colour when they share one, else it is drawn grey (``MIXED_COLOR``).

Nothing here computes a number that is shown to the user: it only decides what to draw where.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gpuscope.trace import timeline as T
from gpuscope.views import timeline_query as Q

if TYPE_CHECKING:
    from gpuscope.trace.flows import Flows

BASE_NS = 256          # g_0: level 1 merges items shorter than 4 × BASE_NS
MAX_LEVELS = 24
KIND_NVTX = "nvtx"
KIND_GPU = "gpu"
KIND_API = "cuda_api"
KIND_OSRT = "osrt"
KIND_GPU_SHARE = "gpu_share"   # a GPU's "who ran when" lane: rows index gpuscope.gpu.sharing segments
GPUS_PID = -1                  # the block of those lanes, above the processes
SEVERAL_COLOR = 0xFF3C3C46     # a stretch when two or more processes had work on the GPU
PALETTE = (0xFF4E79A7, 0xFFF28E2B, 0xFFE15759, 0xFF76B7B2, 0xFF59A14F, 0xFFEDC948,
           0xFFB07AA1, 0xFFFF9DA7, 0xFF9C755F, 0xFF86BCB6)
MEMOP_COLOR = 0xFFD37295
MIXED_COLOR = 0xFF9AA3AE   # a merged block of ranges of several colours


@dataclass
class Level:
    """One level of a row: items (level 0) or merged blocks, sorted by start."""

    start: np.ndarray      # int64
    end: np.ndarray        # int64
    reach: np.ndarray      # running max of end (monotonic: searchsorted finds the first visible)
    count: np.ndarray      # int32: items merged into this block (1 = a single item)
    first: np.ndarray      # int64: position (in level 0) of the first item of the block
    cmin: np.ndarray       # uint32: lowest / highest colour of the block's items (equal: one colour)
    cmax: np.ndarray
    gap_ns: int            # g_k of this level (0 for level 0)

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class Row:
    """One drawable row: a nesting depth of an NVTX lane, or a GPU stream."""

    levels: list[Level]
    ref: np.ndarray        # level-0 item -> index into timeline.ranges (nvtx) / kernels (gpu)
    color: np.ndarray      # level-0 item -> ARGB uint32
    name_id: np.ndarray    # level-0 item -> string id (-1 none)
    is_memop: np.ndarray | None = None   # gpu rows: True where ref indexes timeline.memops
    labels: list | None = None           # NVTX rows: the ranges' full names (``domain:name``) …
    label_id: np.ndarray | None = None   # … and each level-0 item's index into them

    def label(self, pos: int, strings: list[str]) -> str:
        """The name drawn on level-0 item ``pos`` (NVTX: the summary's full name)."""
        if self.labels is not None and self.label_id is not None:
            name = self.labels[int(self.label_id[pos])]
        else:
            nid = int(self.name_id[pos])
            name = strings[nid] if nid >= 0 else None
        return name if name is not None else "(unnamed)"

    def level_for(self, ns_per_px: float) -> Level:
        """The coarsest level whose merge threshold is at most one pixel."""
        best = self.levels[0]
        for lv in self.levels[1:]:
            if lv.gap_ns > ns_per_px:
                break
            best = lv
        return best

    def find(self, t: float, tol: float) -> int:
        """Level-0 position of the item under time ``t`` (± ``tol`` ns), or -1."""
        lv = self.levels[0]
        j = int(np.searchsorted(lv.start, np.int64(math.floor(t + tol)), side="right")) - 1
        best, best_d = -1, tol + 1.0
        for i in range(j, max(-1, j - 64), -1):
            if lv.reach[i] < t - tol:
                break
            s, e = lv.start[i], lv.end[i]
            d = 0.0 if s <= t <= e else min(abs(t - s), abs(t - e))
            if d <= tol and (d < best_d or (d == best_d and e - s < lv.end[best] - lv.start[best])):
                best, best_d = i, d
        return best


@dataclass
class Lane:
    """A group of rows under one label (a thread's ranges of one source/style, or a GPU stream)."""

    pid: int
    kind: str              # KIND_NVTX / KIND_GPU
    label: str
    rows: list[Row]
    tid: int = -1
    source: int = T.SOURCE_NSYS
    style: int = T.STYLE_PUSHPOP
    device: int = -1
    stream: int = -1
    marks: np.ndarray | None = None      # NVTX marks of this thread: sorted times (int64) …
    mark_ref: np.ndarray | None = None   # … and their indexes into timeline.marks
    segments: object | None = None       # KIND_GPU_SHARE: the gpuscope.gpu.sharing.Lane its row draws

    def mark_at(self, t: float, tol: float) -> int:
        """Position (in ``marks``) of the mark nearest ``t`` within ``tol`` ns, or -1."""
        if self.marks is None or not len(self.marks):
            return -1
        j = int(np.searchsorted(self.marks, np.int64(math.floor(t))))
        best, best_d = -1, tol
        for i in (j - 1, j):
            if 0 <= i < len(self.marks) and abs(self.marks[i] - t) <= best_d:
                best, best_d = i, abs(self.marks[i] - t)
        return best


@dataclass
class ProcessBlock:
    """One process's lanes in the timeline, with its label."""

    pid: int
    label: str
    lanes: list[Lane] = field(default_factory=list)
    full_name: str = ""


def _process_label(name: str, pid: int) -> str:
    """``python — pid 12`` for an executable path (nsys names processes so), else the name."""
    if name.startswith("/") and " " not in name:
        name = name.rsplit("/", 1)[-1]
    return f"{name} — pid {pid}"


@dataclass
class TimelineLayout:
    """Everything the painter needs: processes with their lanes, and the time extent."""

    timeline: T.Timeline
    processes: list[ProcessBlock]
    t_min: int
    t_max: int
    mixed_sources: bool    # nsys and gpuscope ranges side by side: mark gpuscope's
    names: Q.RangeNames | None = None    # every NVTX range's full name (labels, highlight, measure)
    flows: Flows | None = None           # pool job submitted -> task taken

    @property
    def n_items(self) -> int:
        return sum(len(r.ref) for p in self.processes for lane in p.lanes for r in lane.rows)


# --------------------------------------------------------------------------- pyramid

def _merge(lv: Level, gap: int, dur0: np.ndarray) -> Level:
    """Merge neighbours of ``lv`` that are both shorter than ``gap`` and less than ``gap`` apart."""
    small = (lv.count > 1) | (dur0 < gap)
    join = small[1:] & small[:-1] & ((lv.start[1:] - lv.reach[:-1]) < gap)
    if not join.any():
        return Level(lv.start, lv.end, lv.reach, lv.count, lv.first, lv.cmin, lv.cmax, gap)
    heads = np.r_[0, np.flatnonzero(~join) + 1]
    end = np.maximum.reduceat(lv.end, heads)
    return Level(start=lv.start[heads], end=end, reach=np.maximum.accumulate(end),
                 count=np.add.reduceat(lv.count, heads).astype(np.int32),
                 first=lv.first[heads], cmin=np.minimum.reduceat(lv.cmin, heads),
                 cmax=np.maximum.reduceat(lv.cmax, heads), gap_ns=gap)


def build_row(start: np.ndarray, end: np.ndarray, ref: np.ndarray, color: np.ndarray,
              name_id: np.ndarray, is_memop: np.ndarray | None = None, labels: list | None = None,
              label_id: np.ndarray | None = None) -> Row:
    """A row with its pyramid; the inputs need not be sorted."""
    order = np.lexsort((-end, start))
    start, end = start[order].astype(np.int64), end[order].astype(np.int64)
    n = len(start)
    color = color[order]
    lv0 = Level(start, end, np.maximum.accumulate(end) if n else end, np.ones(n, np.int32),
                np.arange(n, dtype=np.int64), color, color, 0)
    levels = [lv0]
    span = int(end.max() - start.min()) if n else 0
    gap = BASE_NS * 4
    while len(levels) < MAX_LEVELS and len(levels[-1]) > 1 and gap < 4 * max(span, 1):
        prev = levels[-1]
        dur = prev.end - prev.start
        nxt = _merge(prev, gap, dur)
        levels.append(nxt)
        gap *= 4
    return Row(levels=levels, ref=ref[order], color=color, name_id=name_id[order],
               is_memop=None if is_memop is None else is_memop[order], labels=labels,
               label_id=None if label_id is None else label_id[order])


# --------------------------------------------------------------------------- lanes

def palette_color(name: str | None) -> int:
    """The palette colour of a name: chosen by the name's text (CRC-32), so a name has the same
    colour in every report, whatever order a reader met its strings in."""
    return PALETTE[zlib.crc32((name or "").encode("utf-8", "surrogatepass")) % len(PALETTE)]


def default_colors(name_id: np.ndarray, color: np.ndarray, names: list) -> np.ndarray:
    """The script's colours; items without one get the palette colour of their name
    (``names[name_id]``: the full NVTX name, or a kernel's / call's name).

    nsys stores ``0x00RRGGBB`` (NULL, read as 0, when no colour was given); gpuscope's logs
    ``0xFFRRGGBB``. Only the RGB part is drawn.
    """
    out = np.asarray(color, dtype=np.uint32).copy()
    none = out == 0
    if none.any():
        ids = np.asarray(name_id)[none].astype(np.int64)
        uniq, inv = np.unique(ids, return_inverse=True)
        pal = np.array([palette_color(names[u] if 0 <= u < len(names) else None) for u in uniq.tolist()],
                       dtype=np.uint32)
        out[none] = pal[inv.reshape(-1)]
    return out


def _groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, group starts, group ends) for rows sorted by the given key columns."""
    order = np.lexsort(keys[::-1])
    sk = np.stack([k[order] for k in keys]) if len(order) else np.zeros((len(keys), 0))
    change = np.flatnonzero((sk[:, 1:] != sk[:, :-1]).any(axis=0)) + 1 if len(order) else np.zeros(0, int)
    heads = np.r_[0, change] if len(order) else np.zeros(0, int)
    tails = np.r_[change, len(order)] if len(order) else np.zeros(0, int)
    return order, heads, tails


def _thread_label(tl: T.Timeline, pid: int, tid: int, names: dict) -> str:
    name = names.get((pid, tid))
    if name:
        return f"{name} ({tid})"
    if tid == 0:
        return "no thread id"     # nsys's OS runtime rows of a process without a thread (globalTid's tid 0)
    return f"main thread ({tid})" if tid == pid else f"thread {tid}"


INJECTED_PREFIX = "gpuscope:"   # gpuscope's own ranges (pool tasks, --annotate): NVTX domain "gpuscope"


def _without_injected_colour(color: np.ndarray, names: Q.RangeNames) -> np.ndarray:
    """Colours with gpuscope's own ranges' set to none: nvtx gives them its default blue under nsys,
    gpuscope's logs none, so they get their name's palette colour in both."""
    injected = np.array([n is not None and n.startswith(INJECTED_PREFIX) for n in names.names], dtype=np.bool_)
    if not injected.any():
        return color
    out = np.asarray(color, dtype=np.uint32).copy()
    out[injected[names.ids]] = 0
    return out


def nvtx_lanes(tl: T.Timeline, names: Q.RangeNames | None = None) -> dict[int, list[Lane]]:
    """NVTX lanes per pid: one per (tid, source, style), one row per depth."""
    r = tl.ranges
    out: dict[int, list[Lane]] = {}
    if not len(r):
        return out
    names = names or Q.range_names(tl)
    colors = default_colors(names.ids, _without_injected_colour(r.color, names), names.names)
    tnames = {(int(p), int(t)): tl.strings.get(int(n)) for p, t, n in
              zip(tl.threads.pid, tl.threads.tid, tl.threads.name_id) if n >= 0}
    keys = (r.pid.astype(np.int64), r.tid.astype(np.int64), r.source.astype(np.int64),
            r.style.astype(np.int64), r.depth.astype(np.int64))
    order, heads, tails = _groups(*keys)
    lanes: dict[tuple, Lane] = {}
    for h, t in zip(heads.tolist(), tails.tolist()):
        idx = order[h:t]
        i0 = int(idx[0])
        pid, tid, src, sty = int(r.pid[i0]), int(r.tid[i0]), int(r.source[i0]), int(r.style[i0])
        lane = lanes.get((pid, tid, src, sty))
        if lane is None:
            label = _thread_label(tl, pid, tid, tnames)
            if sty == T.STYLE_STARTEND:
                label += " start/end"
            if src == T.SOURCE_TORCH:
                label += " torch ops"
            elif src == T.SOURCE_PYSPY:
                label += " cpu samples"
            lane = Lane(pid=pid, kind=KIND_NVTX, label=label, rows=[], tid=tid, source=src, style=sty)
            lanes[(pid, tid, src, sty)] = lane
            out.setdefault(pid, []).append(lane)
        lane.rows.append(build_row(r.start_ns[idx], r.end_ns[idx], idx.astype(np.int64), colors[idx],
                                   r.name_id[idx], labels=names.names, label_id=names.ids[idx]))
    return out


def api_lanes(tl: T.Timeline, table: str = "cuda_api") -> dict[int, list[Lane]]:
    """CPU-side calls (``cuda_api``: CUDA runtime/driver; ``osrt``: OS runtime): one single-row
    lane per thread that made any."""
    c = getattr(tl, table)
    out: dict[int, list[Lane]] = {}
    if not len(c):
        return out
    kind, suffix = (KIND_API, "CUDA API") if table == "cuda_api" else (KIND_OSRT, "OS runtime")
    colors = default_colors(c.name_id, np.zeros(len(c), np.uint32), tl.strings.values)
    tnames = {(int(p), int(t)): tl.strings.get(int(n)) for p, t, n in
              zip(tl.threads.pid, tl.threads.tid, tl.threads.name_id) if n >= 0}
    order, heads, tails = _groups(c.pid.astype(np.int64), c.tid.astype(np.int64))
    for h, t in zip(heads.tolist(), tails.tolist()):
        idx = order[h:t]
        pid, tid = int(c.pid[idx[0]]), int(c.tid[idx[0]])
        lane = Lane(pid=pid, kind=kind, label=f"{_thread_label(tl, pid, tid, tnames)} {suffix}", tid=tid,
                    rows=[build_row(c.start_ns[idx], c.end_ns[idx], idx.astype(np.int64), colors[idx],
                                    c.name_id[idx])])
        out.setdefault(pid, []).append(lane)
    return out


def gpu_lanes(tl: T.Timeline) -> dict[int, list[Lane]]:
    """Kernel + memory-operation lanes per pid: one per (device, stream)."""
    k, m = tl.kernels, tl.memops
    if not len(k) and not len(m):
        return {}
    kname = np.where(k.short_name_id >= 0, k.short_name_id, k.name_id)
    pid = np.r_[k.pid, m.pid].astype(np.int64)
    dev = np.r_[k.device, m.device].astype(np.int64)
    stream = np.r_[k.stream, m.stream].astype(np.int64)
    start, end = np.r_[k.start_ns, m.start_ns], np.r_[k.end_ns, m.end_ns]
    ref = np.r_[np.arange(len(k)), np.arange(len(m))].astype(np.int64)
    memop = np.r_[np.zeros(len(k), bool), np.ones(len(m), bool)]
    name = np.r_[kname, m.name_id].astype(np.int32)
    color = np.r_[default_colors(kname, np.zeros(len(k), np.uint32), tl.strings.values),
                  np.full(len(m), MEMOP_COLOR, np.uint32)]
    out: dict[int, list[Lane]] = {}
    # kernels of PyTorch profiler traces (appended last) get lanes of their own beside nsys's
    torch = np.r_[np.arange(len(k)) >= tl.torch_rows.get("kernels", len(k)), np.zeros(len(m), bool)]
    order, heads, tails = _groups(pid, dev, stream, torch.astype(np.int64))
    for h, t in zip(heads.tolist(), tails.tolist()):
        idx = order[h:t]
        i0 = int(idx[0])
        lane = Lane(pid=int(pid[i0]), kind=KIND_GPU,
                    label=f"GPU {dev[i0]} stream {stream[i0]}" + (" torch" if torch[i0] else ""),
                    rows=[build_row(start[idx], end[idx], ref[idx], color[idx], name[idx], memop[idx])],
                    device=int(dev[i0]), stream=int(stream[i0]),
                    source=T.SOURCE_TORCH if torch[i0] else T.SOURCE_NSYS)
        out.setdefault(lane.pid, []).append(lane)
    return out


def gpu_share_block(tl: T.Timeline) -> ProcessBlock | None:
    """One lane per GPU: whose work was on it at each moment (gpuscope.gpu.sharing), or None."""
    if not len(tl.kernels) and not len(tl.memops):
        return None
    from gpuscope.gpu import sharing

    lanes = []
    segs = sharing.device_lanes(tl)
    # one colour per process, the same on every GPU, distinct while the palette lasts
    every = sorted(set().union(*(set(s.pid.tolist()) for s in segs)) - {-1})
    hue = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(every)}
    for seg in segs:
        pids = sorted(set(seg.pid.tolist()) - {-1})
        labels = [f"pid {p}" for p in pids] + ["several processes at once"]
        code = {p: i for i, p in enumerate(pids)}
        label_id = np.array([code.get(p, len(pids)) for p in seg.pid.tolist()], dtype=np.int64)
        color = np.array([hue.get(p, SEVERAL_COLOR) for p in seg.pid.tolist()], dtype=np.uint32)
        row = build_row(seg.start, seg.end, np.arange(len(seg.start), dtype=np.int64), color,
                        np.full(len(seg.start), -1, np.int32), labels=labels, label_id=label_id)
        node, device = sharing.device_of(tl, seg.device)
        lanes.append(Lane(pid=GPUS_PID, kind=KIND_GPU_SHARE, label=f"{node + ' ' if node else ''}GPU {device}: who ran",
                          rows=[row], device=device, segments=seg))
    return ProcessBlock(pid=GPUS_PID, label="GPUs: who ran when", lanes=lanes,
                        full_name="GPUs: whose work was on each GPU (several at once: dark)")


def _extent(tl: T.Timeline) -> tuple[int, int]:
    lo, hi = [], []
    for tab in (tl.ranges, tl.kernels, tl.memops, tl.cuda_api, tl.osrt):
        if len(tab):
            lo.append(int(tab.start_ns.min()))
            hi.append(int(tab.end_ns.max()))
    if len(tl.marks):
        lo.append(int(tl.marks.start_ns.min()))
        hi.append(int(tl.marks.start_ns.max()))
    if not lo:
        return 0, max(int(tl.duration_ns or 0), 1)
    t0, t1 = min(lo), max(hi)
    return t0, max(t1, t0 + 1)


def attach_marks(tl: T.Timeline, nv: dict[int, list[Lane]]) -> None:
    """Give each thread's marks to its first NVTX lane (a lane of its own if it has no ranges)."""
    m = tl.marks
    if not len(m):
        return
    order, heads, tails = _groups(m.pid.astype(np.int64), m.tid.astype(np.int64))
    tnames = {(int(p), int(t)): tl.strings.get(int(n)) for p, t, n in
              zip(tl.threads.pid, tl.threads.tid, tl.threads.name_id) if n >= 0}
    for h, t in zip(heads.tolist(), tails.tolist()):
        idx = order[h:t]
        idx = idx[np.argsort(m.start_ns[idx], kind="stable")]
        pid, tid = int(m.pid[idx[0]]), int(m.tid[idx[0]])
        lane = next((ln for ln in nv.get(pid, []) if ln.tid == tid), None)
        if lane is None:
            empty = np.zeros(0, np.int64)
            lane = Lane(pid=pid, kind=KIND_NVTX, label=_thread_label(tl, pid, tid, tnames), tid=tid,
                        source=int(m.source[idx[0]]),
                        rows=[build_row(empty, empty, empty, empty.astype(np.uint32), empty.astype(np.int32))])
            nv.setdefault(pid, []).append(lane)
        lane.marks, lane.mark_ref = m.start_ns[idx].astype(np.int64), idx.astype(np.int64)


def build_layout(tl: T.Timeline) -> TimelineLayout:
    """Lanes of every process (ordered by first activity), with their pyramids."""
    names = Q.range_names(tl)
    nv, gpu = nvtx_lanes(tl, names), gpu_lanes(tl)
    api, osrt = api_lanes(tl), api_lanes(tl, "osrt")
    for pid, lanes in osrt.items():
        api.setdefault(pid, []).extend(lanes)
    attach_marks(tl, nv)
    pids = list(dict.fromkeys([*tl.processes.pid.tolist(), *nv, *gpu, *api]))
    first: dict[int, float] = {}
    for pid in pids:
        starts = [lv.levels[0].start[0] for lane in nv.get(pid, []) + gpu.get(pid, []) + api.get(pid, [])
                  for lv in lane.rows if len(lv.levels[0])]
        first[pid] = float(min(starts)) if starts else float("inf")
    blocks = []
    # a job across nodes: one group of lanes per node (in node order), its processes by first activity
    group_order = {g: i for i, g in enumerate(dict.fromkeys(tl.groups[p] for p in sorted(tl.groups)))}
    for pid in sorted(pids, key=lambda p: (group_order.get(tl.groups.get(p, ''), -1), first[p], p)):
        # per thread (main thread first): its NVTX lanes, then its CUDA API lane
        lanes = sorted(nv.get(pid, []) + api.get(pid, []),
                       key=lambda ln: (ln.tid != pid, ln.tid, _CALL_ORDER.get(ln.kind, 0), ln.source, ln.style))
        label = tl.process_name(pid) if pid in tl.groups else _process_label(tl.process_name(pid), pid)
        blocks.append(ProcessBlock(pid=pid, label=label, lanes=lanes + gpu.get(pid, []),
                                   full_name=tl.process_name(pid)))
    share = gpu_share_block(tl)
    if share is not None:
        blocks.insert(0, share)
    srcs = np.unique(tl.ranges.source) if len(tl.ranges) else np.zeros(0)
    nsys_seen = bool(len(tl.processes) and (tl.processes.source & (1 << T.SOURCE_NSYS)).any())
    mixed = T.SOURCE_GPUSCOPE in srcs.tolist() and (T.SOURCE_NSYS in srcs.tolist() or nsys_seen)
    t0, t1 = _extent(tl)
    return TimelineLayout(timeline=tl, processes=blocks, t_min=t0, t_max=t1, mixed_sources=mixed, names=names)


_CALL_ORDER = {KIND_API: 1, KIND_OSRT: 2}   # a thread's NVTX lanes, then its CUDA API, then OS runtime
