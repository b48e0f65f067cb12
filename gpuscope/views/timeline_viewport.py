"""The timeline view's state without Qt: which time span and which lanes are in view, what lies
under a position, where an item is drawn, the flows that cross the view, and what is selected
or highlighted.

Positions are in the widget's pixels: the lanes' labels take ``GUTTER`` pixels on the left, the
time axis ``AXIS_H`` on top. The widget (``gpuscope.app.timeline.qt_timeline.QtTimeline``) tells
its size, forwards input as calls on this model, and paints what it says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gpuscope.views import timeline_lod as L

GUTTER = 200       # px of lane labels on the left
AXIS_H = 24        # px of the time axis on top
ROW_H = 18
PROC_H = 22
LANE_GAP = 4
MARK_H = 7         # px: NVTX marks are small triangles on top of a thread's first row
MIN_NS_PER_PX = 0.01
FLOWS_MAX = 400    # flow arrows are drawn when at most this many cross the view (zoom in for more)

Item = tuple[L.Lane, "L.Row | None", int]     # (lane, row or None for a mark, level-0 position)


@dataclass
class Slot:
    """A line of the vertical layout: a process header or one row of a lane."""

    y: int
    h: int
    block: L.ProcessBlock
    lane: L.Lane | None = None
    row: L.Row | None = None
    depth: int = 0


class Viewport:
    """Time span (``t0``, ``nspp`` ns per pixel), vertical scroll, and the lanes' layout."""

    def __init__(self, size: Callable[[], tuple[int, int, int]] | None = None) -> None:
        self._size = size             # (width, height, scroll bar width) of the widget, read when needed
        self._fixed = (900, 400, 0)
        self.layout: L.TimelineLayout | None = None
        self.slots: list[Slot] = []
        self.content_h = 0
        self.t0 = 0.0
        self.nspp = 1.0
        self.scroll_y = 0
        self.auto_fit = True           # stays fitted through resizes until the user zooms or pans
        self.extent: tuple[float, float] | None = None
        self.thread_y: dict[tuple[int, int], int] = {}    # (pid, tid) -> y of its first NVTX row
        self.process_y: dict[int, int] = {}
        self.selected: Item | None = None
        self.highlight: tuple[str, np.ndarray] | None = None   # (table, bool mask over its items)
        self.hl_rows: dict[int, np.ndarray] = {}      # id(row) -> level-0 positions highlighted

    # -- layout -------------------------------------------------------------------------------------
    def set_layout(self, layout: L.TimelineLayout | None) -> None:
        self.layout = layout
        self.selected = None
        self.highlight, self.hl_rows = None, {}
        self.slots, self.thread_y, self.process_y = [], {}, {}
        y = 0
        for block in layout.processes if layout is not None else []:
            self.slots.append(Slot(y, PROC_H, block))
            self.process_y.setdefault(block.pid, y)
            y += PROC_H
            for lane in block.lanes:
                if lane.kind == L.KIND_NVTX:
                    self.thread_y.setdefault((lane.pid, lane.tid), y)
                for depth, row in enumerate(lane.rows):
                    self.slots.append(Slot(y, ROW_H, block, lane, row, depth))
                    y += ROW_H
                y += LANE_GAP
        self.content_h = y
        self.scroll_y = 0

    def set_size(self, width: int, height: int, bar_w: int) -> None:
        """A fixed size (no widget to ask): width, height, and the width of the vertical scroll bar."""
        self._size, self._fixed = None, (width, height, bar_w)

    def size(self) -> tuple[int, int, int]:
        return self._size() if self._size is not None else self._fixed

    @property
    def visible_h(self) -> int:
        return self.size()[1] - AXIS_H

    def needs_bar(self) -> bool:
        return self.content_h > self.visible_h

    def plot_width(self) -> int:
        width, _, bar_w = self.size()
        return max(10, width - GUTTER - (bar_w if self.needs_bar() else 0))

    def scroll_top(self) -> int:
        """The largest vertical scroll."""
        return max(0, self.content_h - self.visible_h + 8)

    # -- time span ----------------------------------------------------------------------------------
    def view_range(self) -> tuple[float, float]:
        return self.t0, self.t0 + self.nspp * self.plot_width()

    def span(self) -> tuple[float, float] | None:
        if self.extent is not None:
            return self.extent
        return None if self.layout is None else (self.layout.t_min, self.layout.t_max)

    def apply_view(self, t0: float, t1: float) -> None:
        t1 = max(t1, t0 + MIN_NS_PER_PX * self.plot_width())
        self.nspp = max(MIN_NS_PER_PX, (t1 - t0) / self.plot_width())
        self.t0 = t0
        self.clamp()

    def fit(self) -> None:
        """Everything in view (Home)."""
        span = self.span()
        if span is None:
            self.apply_view(0.0, 1e9)
        else:
            lo, hi = span
            pad = (hi - lo) * 0.02
            self.apply_view(lo - pad, hi + pad)
        self.auto_fit = True

    def zoom(self, factor: float, anchor_x: float | None = None) -> None:
        """Zoom in (factor > 1) or out around a widget x position (default: the centre)."""
        self.auto_fit = False
        ax = (self.plot_width() / 2) if anchor_x is None else max(0.0, anchor_x - GUTTER)
        t_anchor = self.t0 + ax * self.nspp
        self.nspp = max(MIN_NS_PER_PX, self.nspp / factor)
        self.t0 = t_anchor - ax * self.nspp
        self.clamp()

    def pan(self, dx: float, dy: float = 0.0) -> None:
        """Move the content by (dx, dy) pixels (positive dx shows earlier times)."""
        if dx:
            self.auto_fit = False
        self.t0 -= dx * self.nspp
        self.scroll_y = int(self.scroll_y - dy)
        self.clamp()

    def clamp(self) -> None:
        """Keep the view near the span (zoomed out at most 4 times it) and the scroll in range."""
        span = self.span()
        if span is not None:
            lo, hi = span
            width = max(hi - lo, 1)
            self.nspp = min(self.nspp, width * 4.0 / self.plot_width())
            w = self.nspp * self.plot_width()
            self.t0 = min(max(self.t0, lo - w * 0.9), hi - w * 0.1)
        self.scroll_y = max(0, min(self.scroll_y, self.scroll_top()))

    def time_at(self, x: float) -> float:
        """The time (ns on the timeline's base) at a widget x position."""
        return self.t0 + (x - GUTTER) * self.nspp

    def x_of(self, t: float) -> float:
        return GUTTER + (t - self.t0) / self.nspp

    def y_of(self, slot: Slot) -> float:
        """Widget y of a slot's top."""
        return AXIS_H + slot.y - self.scroll_y

    # -- hit testing --------------------------------------------------------------------------------
    def visible_slots(self) -> list[Slot]:
        top, bottom = self.scroll_y, self.scroll_y + self.visible_h
        return [s for s in self.slots if s.y + s.h > top and s.y < bottom]

    def slot_at(self, y: float) -> Slot | None:
        cy = y - AXIS_H + self.scroll_y
        if y < AXIS_H:
            return None
        return next((s for s in self.slots if s.y <= cy < s.y + s.h), None)

    def item_at(self, x: float, y: float) -> Item | None:
        """(lane, row, level-0 position) of the item under a widget position (row None: a mark)."""
        if self.layout is None or x < GUTTER:
            return None
        s = self.slot_at(y)
        if s is None or s.row is None or s.lane is None:
            return None
        t = self.time_at(x)
        if s.depth == 0 and y - self.y_of(s) <= MARK_H + 1:
            k = s.lane.mark_at(t, 4.0 * self.nspp)
            if k >= 0:
                return s.lane, None, k
        i = s.row.find(t, 3.0 * self.nspp)
        return None if i < 0 else (s.lane, s.row, i)

    def position_of(self, kind: str, index: int) -> tuple[float, float] | None:
        """Widget position of the middle of a range/kernel/mark (by timeline index)."""
        if kind == "mark":
            return self.mark_position(index)
        want = {"nvtx": L.KIND_NVTX, "torch": L.KIND_NVTX, "cuda_api": L.KIND_API,
                "osrt": L.KIND_OSRT}.get(kind, L.KIND_GPU)
        for s in self.slots:
            if s.row is None or s.lane is None or s.lane.kind != want:
                continue
            hit = np.flatnonzero(s.row.ref == index)
            if s.lane.kind == L.KIND_GPU and s.row.is_memop is not None:
                hit = hit[s.row.is_memop[hit] == (kind == "memop")]
            if len(hit):
                lv = s.row.levels[0]
                return self.x_of((lv.start[hit[0]] + lv.end[hit[0]]) / 2), self.y_of(s) + s.h / 2
        return None

    def mark_position(self, index: int) -> tuple[float, float] | None:
        for s in self.slots:
            if s.lane is not None and s.depth == 0 and s.lane.mark_ref is not None and s.lane.marks is not None:
                hit = np.flatnonzero(s.lane.mark_ref == index)
                if len(hit):
                    return self.x_of(s.lane.marks[hit[0]]), self.y_of(s) + 3
        return None

    # -- flows --------------------------------------------------------------------------------------
    def flow_y(self, pid: int, tid: int) -> float | None:
        """Widget y where a flow meets thread (pid, tid): its first NVTX row, else its process header."""
        y = self.thread_y.get((pid, tid))
        if y is None:
            y = self.process_y.get(pid)
            return None if y is None else AXIS_H + y - self.scroll_y + PROC_H / 2
        return AXIS_H + y - self.scroll_y + ROW_H / 2

    def visible_flows(self) -> np.ndarray:
        """Indexes of the flows drawn in this view: those crossing it, when at most FLOWS_MAX do."""
        fl = self.layout.flows if self.layout is not None else None
        if fl is None or not len(fl):
            return np.zeros(0, np.int64)
        t0, t1 = self.view_range()
        lo, hi = np.minimum(fl.src_ns, fl.dst_ns), np.maximum(fl.src_ns, fl.dst_ns)
        hit = np.flatnonzero((lo <= t1) & (hi >= t0))
        return hit if len(hit) <= FLOWS_MAX else np.zeros(0, np.int64)

    # -- highlight ----------------------------------------------------------------------------------
    def set_highlight(self, table: str, index: np.ndarray) -> None:
        """Highlight items of a Timeline table by index (none: clear)."""
        self.highlight, self.hl_rows = None, {}
        if self.layout is None or not len(index):
            return
        mask = np.zeros(len(getattr(self.layout.timeline, table)), dtype=bool)
        mask[index] = True
        self.highlight = (table, mask)
        for s in self.slots:
            if s.row is not None and s.lane is not None and id(s.row) not in self.hl_rows:
                pos = row_hits(s.lane, s.row, table, mask)
                if len(pos):
                    self.hl_rows[id(s.row)] = pos

    def locate(self, table: str, index: int) -> tuple[Slot, int] | None:
        """The slot and level-0 position where item ``index`` of ``table`` is drawn."""
        if self.layout is None or index < 0:
            return None
        one = np.zeros(len(getattr(self.layout.timeline, table)), dtype=bool)
        one[index] = True
        for s in self.slots:
            if s.row is not None and s.lane is not None:
                pos = row_hits(s.lane, s.row, table, one)
                if len(pos):
                    return s, int(pos[0])
        return None

    def jump_to(self, table: str, index: int) -> Item | None:
        """Zoom to an item (with context either side), scroll its lane into view, select it."""
        found = self.locate(table, index)
        if found is None:
            return None
        s, pos = found
        assert s.row is not None and s.lane is not None
        lv = s.row.levels[0]
        a, b = float(lv.start[pos]), float(lv.end[pos])
        pad = max((b - a) * 0.25, 1.0)
        self.auto_fit = False
        self.apply_view(a - pad, b + pad)
        if not (self.scroll_y <= s.y and s.y + s.h <= self.scroll_y + self.visible_h):
            self.scroll_y = max(0, s.y - self.visible_h // 3)
            self.clamp()
        self.selected = (s.lane, s.row, pos)
        return self.selected


def row_table(lane: L.Lane) -> str:
    """The Timeline table a lane's rows index (GPU lanes: kernels and memops, by ``is_memop``)."""
    return {L.KIND_NVTX: "ranges", L.KIND_API: "cuda_api", L.KIND_OSRT: "osrt",
            L.KIND_GPU_SHARE: "gpu_share"}.get(lane.kind, "kernels")


def row_hits(lane: L.Lane, row: L.Row, table: str, mask: np.ndarray) -> np.ndarray:
    """Level-0 positions of ``row`` whose item is set in ``mask`` (a mask over ``table``)."""
    if row_table(lane) != table and not (lane.kind == L.KIND_GPU and table in ("kernels", "memops")):
        return np.zeros(0, np.int64)
    ok = mask[np.clip(row.ref, 0, len(mask) - 1)] if len(mask) else np.zeros(len(row.ref), bool)
    if lane.kind == L.KIND_GPU and row.is_memop is not None:
        ok &= row.is_memop == (table == "memops")
    return np.flatnonzero(ok)
