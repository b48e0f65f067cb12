"""QtTimeline: the timeline view, a QWidget painting a Timeline with QPainter.

One lane per process thread (NVTX ranges, a row per nesting depth, then its CUDA API and OS
runtime calls) and per GPU stream (kernels, memory operations). Level of detail comes from
:mod:`gpuscope.views.timeline_lod`: items narrower than a pixel are merged into blocks, so a frame
costs about the same for a thousand ranges as for a million. Wheel / Ctrl+wheel / ``+`` ``-`` /
W S zoom, drag, arrow keys and A D pan, Home resets, hover shows a tooltip, a click selects a range
and emits :attr:`QtTimeline.sigRangeSelected`. Shift+drag (or a drag on the time axis) measures a
span (:attr:`QtTimeline.sigMeasured`), Esc clears it; :meth:`QtTimeline.highlight_name` highlights
the items of a summary row and shows the longest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QCursor, QPainter, QPen
from PySide6.QtWidgets import QScrollBar, QSizePolicy, QToolTip, QWidget

from gpuscope.views import timeline_lod as L
from gpuscope.views import timeline_query as Q
from gpuscope.views import timeline_text as TT
from gpuscope.app.timeline.qt_timeline_paint import (AXIS_H, GUTTER, RowPainter, paint_axis, paint_focus, paint_gutter,
                                            paint_flows, paint_highlight, paint_measure)
from gpuscope.trace import timeline as T

ROW_H = 18
PROC_H = 22
LANE_GAP = 4
MARK_H = 7         # px: NVTX marks are small triangles on top of a thread's first row
ZOOM_STEP = 1.25
MIN_NS_PER_PX = 0.01
FLOWS_MAX = 400    # flow arrows are drawn when at most this many cross the view (zoom in for more)


@dataclass
class _Slot:
    """A line of the vertical layout: a process header or one row of a lane."""

    y: int
    h: int
    block: L.ProcessBlock
    lane: L.Lane | None = None
    row: L.Row | None = None
    depth: int = 0


class QtTimeline(QWidget):
    """Paints a :class:`~gpuscope.trace.timeline.Timeline`; set it with :meth:`set_timeline`."""

    # the keys keyPressEvent handles, for Help → Keyboard shortcuts (gpuscope.app.qt_help)
    KEY_HELP_AREA = "timeline"
    KEY_HELP = (("+ / −, W / S, wheel", "zoom in / out (W / S around the pointer)"),
                ("← / →, A / D", "pan in time"), ("↑ / ↓, PgUp / PgDn", "scroll lanes"),
                ("Home", "fit the whole run, lanes back to the top"), ("Shift+wheel", "scroll lanes"),
                ("Shift+drag, drag on the time axis", "measure a span"), ("Esc", "clear the measure"),
                ("Tab", "focus the timeline (blue outline)"))

    sigRangeSelected = Signal(dict)
    sigViewChanged = Signal(float, float)
    sigMeasured = Signal(object)     # a timeline_query.Measure (None: the measure was cleared)

    def __init__(self, timeline: T.Timeline | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAutoFillBackground(False)
        self._layout: L.TimelineLayout | None = None
        self._slots: list[_Slot] = []
        self._content_h = 0
        self._t0 = 0.0
        self._nspp = 1.0
        self._scroll_y = 0
        self._press: QPoint | None = None
        self._press_x = 0.0
        self._press_view: tuple[float, int] = (0.0, 0)
        self._dragged = False
        self._auto_fit = True
        self._extent: tuple[float, float] | None = None
        self._selected: tuple[L.Lane, L.Row, int] | None = None
        self._domains: dict[tuple[int, int], str] = {}
        self._measuring = False                       # a measure drag is in progress
        self._measure: Q.Measure | None = None
        self._highlight: tuple[str, np.ndarray] | None = None   # (table, bool mask over its items)
        self._hl_rows: dict[int, np.ndarray] = {}      # id(row) -> level-0 positions highlighted
        self.last_paint_ms = 0.0
        self.painter = RowPainter(self.font())
        self.vbar = QScrollBar(Qt.Orientation.Vertical, self)
        self.vbar.valueChanged.connect(self._on_vbar)
        self.vbar.hide()
        if timeline is not None:
            self.set_timeline(timeline)

    # ----------------------------------------------------------------- model

    def set_timeline(self, timeline: T.Timeline | None) -> None:
        """Show ``timeline`` (None clears the view); builds its lanes on this thread."""
        self.set_layout(None if timeline is None else L.build_layout(timeline))

    def set_layout(self, layout: L.TimelineLayout | None) -> None:
        """Show a layout prepared elsewhere (e.g. on a worker thread by the report view)."""
        self._layout = layout
        self._selected = None
        self._measure = None
        self._highlight, self._hl_rows = None, {}
        self._domains = layout.timeline.domain_names() if layout is not None else {}
        self._build_slots()
        self.fit()

    @property
    def layout_model(self) -> L.TimelineLayout | None:
        return self._layout

    @property
    def timeline(self) -> T.Timeline | None:
        return self._layout.timeline if self._layout is not None else None

    @property
    def ns_per_px(self) -> float:
        return self._nspp

    @property
    def scroll_y(self) -> int:
        return self._scroll_y

    def content_height(self) -> int:
        """Pixels the axis and all lanes need."""
        return AXIS_H + self._content_h

    def slots(self) -> list[_Slot]:
        return list(self._slots)

    def _build_slots(self) -> None:
        self._slots = []
        self._thread_y: dict[tuple[int, int], int] = {}    # (pid, tid) -> y of its first NVTX row
        self._process_y: dict[int, int] = {}
        y = 0
        if self._layout is not None:
            for block in self._layout.processes:
                self._slots.append(_Slot(y, PROC_H, block))
                self._process_y.setdefault(block.pid, y)
                y += PROC_H
                for lane in block.lanes:
                    if lane.kind == L.KIND_NVTX:
                        self._thread_y.setdefault((lane.pid, lane.tid), y)
                    for depth, row in enumerate(lane.rows):
                        self._slots.append(_Slot(y, ROW_H, block, lane, row, depth))
                        y += ROW_H
                    y += LANE_GAP
        self._content_h = y
        self._scroll_y = 0

    # ----------------------------------------------------------------- view

    def sizeHint(self) -> QSize:
        return QSize(900, 400)

    def plot_width(self) -> int:
        bar = self.vbar.sizeHint().width() if self._needs_bar() else 0
        return max(10, self.width() - GUTTER - bar)

    def _needs_bar(self) -> bool:
        return self._content_h > self.height() - AXIS_H

    def view_range(self) -> tuple[float, float]:
        return self._t0, self._t0 + self._nspp * self.plot_width()

    def set_view(self, t0: float, t1: float) -> None:
        """Show the time span [t0, t1] (ns on the timeline's base)."""
        self._auto_fit = False
        self._apply_view(t0, t1)

    def _apply_view(self, t0: float, t1: float) -> None:
        t1 = max(t1, t0 + MIN_NS_PER_PX * self.plot_width())
        self._nspp = max(MIN_NS_PER_PX, (t1 - t0) / self.plot_width())
        self._t0 = t0
        self._clamp()
        self.update()
        self.sigViewChanged.emit(*self.view_range())

    def set_extent(self, extent: tuple[float, float] | None) -> None:
        """The time span Home fits and zoom/pan stay near (default: the timeline's own span).

        Timelines stacked on one shared axis (the compare view) all get the span of the longest."""
        self._extent = extent
        if self._auto_fit:
            self.fit()
        else:
            self._clamp()

    def reset_view(self) -> None:
        """Home: everything fitted, lanes scrolled to the top."""
        self.fit()
        self._scroll_y = 0
        self._clamp()
        self.update()

    def time_at(self, x: float) -> float:
        """The time (ns on the timeline's base) at a widget x position."""
        return self._t0 + (x - GUTTER) * self._nspp

    def _span(self) -> tuple[float, float] | None:
        if self._extent is not None:
            return self._extent
        return None if self._layout is None else (self._layout.t_min, self._layout.t_max)

    def fit(self) -> None:
        """Show everything (Home)."""
        span = self._span()
        if span is None:
            self._apply_view(0.0, 1e9)
        else:
            lo, hi = span
            pad = (hi - lo) * 0.02
            self._apply_view(lo - pad, hi + pad)
        self._auto_fit = True    # stays fitted through resizes until the user zooms or pans

    def zoom(self, factor: float, anchor_x: float | None = None) -> None:
        """Zoom in (factor > 1) or out around a widget x position (default: the centre)."""
        self._auto_fit = False
        ax = (self.plot_width() / 2) if anchor_x is None else max(0.0, anchor_x - GUTTER)
        t_anchor = self._t0 + ax * self._nspp
        self._nspp = max(MIN_NS_PER_PX, self._nspp / factor)
        self._t0 = t_anchor - ax * self._nspp
        self._clamp()
        self.update()
        self.sigViewChanged.emit(*self.view_range())

    def pan_px(self, dx: float, dy: float = 0.0) -> None:
        """Move the content by (dx, dy) pixels (positive dx shows earlier times)."""
        if dx:
            self._auto_fit = False
        self._t0 -= dx * self._nspp
        self._scroll_y = int(self._scroll_y - dy)
        self._clamp()
        self.update()
        self.sigViewChanged.emit(*self.view_range())

    def _clamp(self) -> None:
        span = self._span()
        if span is not None:
            lo, hi = span
            span = max(hi - lo, 1)
            self._nspp = min(self._nspp, span * 4.0 / self.plot_width())
            w = self._nspp * self.plot_width()
            self._t0 = min(max(self._t0, lo - w * 0.9), hi - w * 0.1)
        visible_h = self.height() - AXIS_H
        top = max(0, self._content_h - visible_h + 8)
        self._scroll_y = max(0, min(self._scroll_y, top))
        self._sync_bar(top, visible_h)

    def _sync_bar(self, top: int, visible_h: int) -> None:
        need = self._needs_bar()
        if need:
            w = self.vbar.sizeHint().width()
            self.vbar.setGeometry(self.width() - w, AXIS_H, w, max(10, visible_h))
            self.vbar.blockSignals(True)
            self.vbar.setRange(0, top)
            self.vbar.setPageStep(max(1, visible_h))
            self.vbar.setSingleStep(ROW_H)
            self.vbar.setValue(self._scroll_y)
            self.vbar.blockSignals(False)
        self.vbar.setVisible(need)

    def _on_vbar(self, value: int) -> None:
        self._scroll_y = value
        self.update()

    # ----------------------------------------------------------------- hit testing

    def slot_at(self, y: float) -> _Slot | None:
        cy = y - AXIS_H + self._scroll_y
        if y < AXIS_H:
            return None
        for s in self._slots:
            if s.y <= cy < s.y + s.h:
                return s
        return None

    def item_at(self, pos: QPoint | QPointF) -> tuple[L.Lane, L.Row, int] | None:
        """(lane, row, level-0 position) of the item under a widget position, or None."""
        if self._layout is None or pos.x() < GUTTER:
            return None
        s = self.slot_at(pos.y())
        if s is None or s.row is None or s.lane is None:
            return None
        t = self._t0 + (pos.x() - GUTTER) * self._nspp
        if s.depth == 0 and pos.y() - (AXIS_H + s.y - self._scroll_y) <= MARK_H + 1:
            k = s.lane.mark_at(t, 4.0 * self._nspp)
            if k >= 0:
                return s.lane, None, k
        i = s.row.find(t, 3.0 * self._nspp)
        return None if i < 0 else (s.lane, s.row, i)

    def details(self, item: tuple[L.Lane, L.Row, int]) -> dict[str, Any]:
        assert self._layout is not None
        return TT.range_details(self._layout, *item, self._domains)

    def position_of(self, kind: str, index: int) -> QPointF | None:
        """Widget position of the middle of a range/kernel/mark (by timeline index)."""
        if kind == "mark":
            return self._mark_position(index)
        for s in self._slots:
            want = {"nvtx": L.KIND_NVTX, "cuda_api": L.KIND_API, "osrt": L.KIND_OSRT}.get(kind, L.KIND_GPU)
            if s.row is None or s.lane is None or s.lane.kind != want:
                continue
            hit = np.flatnonzero(s.row.ref == index)
            if s.lane.kind == L.KIND_GPU and s.row.is_memop is not None:
                hit = hit[s.row.is_memop[hit] == (kind == "memop")]
            if len(hit):
                lv = s.row.levels[0]
                t = (lv.start[hit[0]] + lv.end[hit[0]]) / 2
                return QPointF(GUTTER + (t - self._t0) / self._nspp, AXIS_H + s.y - self._scroll_y + s.h / 2)
        return None

    def _mark_position(self, index: int) -> QPointF | None:
        for s in self._slots:
            if s.lane is not None and s.depth == 0 and s.lane.mark_ref is not None:
                hit = np.flatnonzero(s.lane.mark_ref == index)
                if len(hit):
                    t = s.lane.marks[hit[0]]
                    return QPointF(GUTTER + (t - self._t0) / self._nspp, AXIS_H + s.y - self._scroll_y + 3)
        return None

    def select_at(self, pos: QPoint | QPointF) -> dict[str, Any] | None:
        item = self.item_at(pos)
        self._selected = item
        self.update()
        if item is None:
            return None
        d = self.details(item)
        self.sigRangeSelected.emit(d)
        return d

    @property
    def selected(self) -> dict[str, Any] | None:
        return self.details(self._selected) if self._selected is not None else None

    # ----------------------------------------------------------------- flows

    def set_flows(self, flows) -> None:
        """Arrows from a pool job's submission to each of its tasks (``gpuscope.trace.flows.Flows``)."""
        if self._layout is not None:
            self._layout.flows = flows
            self.update()

    @property
    def flows(self):
        return self._layout.flows if self._layout is not None else None

    def flow_y(self, pid: int, tid: int) -> float | None:
        """Widget y where a flow meets thread (pid, tid): its first NVTX row, else its process header."""
        y = self._thread_y.get((pid, tid))
        if y is None:
            y = self._process_y.get(pid)
            if y is None:
                return None
            return AXIS_H + y - self._scroll_y + PROC_H / 2
        return AXIS_H + y - self._scroll_y + ROW_H / 2

    def visible_flows(self) -> np.ndarray:
        """Indexes of the flows drawn in this view: those crossing it, when at most FLOWS_MAX do."""
        fl = self.flows
        if fl is None or not len(fl):
            return np.zeros(0, np.int64)
        t0, t1 = self.view_range()
        lo, hi = np.minimum(fl.src_ns, fl.dst_ns), np.maximum(fl.src_ns, fl.dst_ns)
        hit = np.flatnonzero((lo <= t1) & (hi >= t0))
        return hit if len(hit) <= FLOWS_MAX else np.zeros(0, np.int64)

    # ----------------------------------------------------------------- measure

    @property
    def measure(self) -> Q.Measure | None:
        """The measured span and what it holds (None when nothing is measured)."""
        return self._measure

    def measure_span(self, t0: float, t1: float, emit: bool = True) -> Q.Measure | None:
        """Measure [t0, t1] (as a shift-drag does): its duration and, per name, the items in it."""
        if self._layout is None:
            return None
        self._measure = Q.measure(self._layout.timeline, t0, t1, self._layout.names)
        self.update()
        if emit:
            self.sigMeasured.emit(self._measure)
        return self._measure

    def clear_measure(self) -> None:
        if self._measure is not None:
            self._measure = None
            self.update()
            self.sigMeasured.emit(None)

    # ----------------------------------------------------------------- highlight

    @property
    def highlighted(self) -> tuple[str, np.ndarray] | None:
        """(table, indexes into it) of the highlighted items, or None."""
        if self._highlight is None:
            return None
        return self._highlight[0], np.flatnonzero(self._highlight[1])

    def highlight_name(self, summary_key: str, name: str, naming: str = "plain", jump: bool = True) -> int:
        """Highlight the items of a summary row (tab ``summary_key``: nvtx, kernel, memop, cuda_api,
        osrt; ``name`` as the table prints it) and, with ``jump``, show and select the longest.
        Returns how many items are highlighted."""
        if self._layout is None:
            return 0
        table, index = Q.matching(self._layout.timeline, summary_key, name, naming, self._layout.names)
        self.highlight(table, index, jump)
        return len(index)

    def highlight(self, table: str, index: np.ndarray, jump: bool = True) -> None:
        """Highlight items of a Timeline table (``ranges``, ``kernels``, ``memops``, ``cuda_api``,
        ``osrt``) by index; with ``jump``, zoom to the longest, scroll its lane into view, select it."""
        self._highlight, self._hl_rows = None, {}
        if self._layout is not None and len(index):
            mask = np.zeros(len(getattr(self._layout.timeline, table)), dtype=bool)
            mask[index] = True
            self._highlight = (table, mask)
            for s in self._slots:
                if s.row is not None and s.lane is not None and id(s.row) not in self._hl_rows:
                    pos = self._row_hits(s.lane, s.row, table, mask)
                    if len(pos):
                        self._hl_rows[id(s.row)] = pos
            if jump:
                self._jump_to(table, Q.longest(self._layout.timeline, table, np.asarray(index)))
        self.update()

    def clear_highlight(self) -> None:
        if self._highlight is not None:
            self._highlight, self._hl_rows = None, {}
            self.update()

    @staticmethod
    def _row_hits(lane: L.Lane, row: L.Row, table: str, mask: np.ndarray) -> np.ndarray:
        """Level-0 positions of ``row`` whose item is set in ``mask`` (a mask over ``table``)."""
        if _row_table(lane) != table and not (lane.kind == L.KIND_GPU and table in ("kernels", "memops")):
            return np.zeros(0, np.int64)
        ok = mask[np.clip(row.ref, 0, len(mask) - 1)] if len(mask) else np.zeros(len(row.ref), bool)
        if lane.kind == L.KIND_GPU and row.is_memop is not None:
            ok &= row.is_memop == (table == "memops")
        return np.flatnonzero(ok)

    def _jump_to(self, table: str, index: int) -> None:
        """Zoom to item ``index`` of ``table`` (with context either side), scroll its lane into
        view and select it."""
        if index < 0:
            return
        one = _one(len(getattr(self._layout.timeline, table)), index)
        for s in self._slots:
            if s.row is None or s.lane is None:
                continue
            pos = self._row_hits(s.lane, s.row, table, one)
            if not len(pos):
                continue
            lv = s.row.levels[0]
            a, b = float(lv.start[pos[0]]), float(lv.end[pos[0]])
            pad = max((b - a) * 0.25, 1.0)
            self.set_view(a - pad, b + pad)
            visible_h = self.height() - AXIS_H
            if not (self._scroll_y <= s.y and s.y + s.h <= self._scroll_y + visible_h):
                self._scroll_y = max(0, s.y - visible_h // 3)
                self._clamp()
            self._selected = (s.lane, s.row, int(pos[0]))
            self.sigRangeSelected.emit(self.details(self._selected))
            return

    # ----------------------------------------------------------------- painting

    def paintEvent(self, event) -> None:
        started = time.perf_counter()
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), QColor(250, 250, 250))
            if self._layout is None:
                p.setPen(QColor(110, 110, 110))
                p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No timeline: open a report or run with nsys")
                return
            self._paint_rows(p)
            paint_gutter(self, p, self._visible_slots())
            paint_axis(self, p)
            if self._measure is not None:
                paint_measure(self, p, self._measure)
            if self.hasFocus():
                paint_focus(self, p)
        finally:
            p.end()
        self.last_paint_ms = (time.perf_counter() - started) * 1000.0

    def _visible_slots(self) -> list[_Slot]:
        top, bottom = self._scroll_y, self._scroll_y + self.height() - AXIS_H
        return [s for s in self._slots if s.y + s.h > top and s.y < bottom]

    def _paint_rows(self, p: QPainter) -> None:
        t0, t1 = self.view_range()
        w = self.plot_width()
        p.save()
        p.setClipRect(QRectF(GUTTER, AXIS_H, w, self.height() - AXIS_H))
        hatch = self._layout.mixed_sources if self._layout else False
        for s in self._visible_slots():
            y = AXIS_H + s.y - self._scroll_y
            if s.row is None:
                p.fillRect(QRectF(GUTTER, y, w, s.h), QColor(232, 236, 242))
                continue
            gs = hatch and s.lane is not None and s.lane.source == T.SOURCE_GPUSCOPE \
                and s.lane.kind == L.KIND_NVTX
            self.painter.paint_row(p, s.row, self._layout.timeline, t0, self._nspp, GUTTER, y + 1,
                                   s.h - 2, w, hatched=gs)
            if s.depth == 0 and s.lane is not None and s.lane.marks is not None:
                self.painter.paint_marks(p, s.lane, self._layout.timeline, t0, self._nspp, GUTTER, y, w)
        if self._highlight is not None:
            paint_highlight(self, p, self._visible_slots(), self._hl_rows, t0)
        paint_flows(self, p, self.visible_flows())
        if self._selected is not None:
            self._paint_selection(p)
        p.restore()

    def _paint_selection(self, p: QPainter) -> None:
        lane, row, i = self._selected
        if row is None:   # a mark
            pt = self._mark_position(int(lane.mark_ref[i]))
            if pt is not None:
                p.setPen(QPen(QColor(0, 0, 0), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawEllipse(pt, MARK_H, MARK_H)
            return
        for s in self._slots:
            if s.row is row:
                lv = row.levels[0]
                x0 = GUTTER + (lv.start[i] - self._t0) / self._nspp
                x1 = GUTTER + (lv.end[i] - self._t0) / self._nspp
                y = AXIS_H + s.y - self._scroll_y
                p.setPen(QPen(QColor(0, 0, 0), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(QRectF(x0 - 1, y, max(x1 - x0, 1) + 2, s.h))
                return

    # ----------------------------------------------------------------- input

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._auto_fit:
            self.fit()    # e.g. laid out while its tab was hidden
        else:
            self._clamp()

    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self.update()     # the focus outline

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.update()

    def _cursor_x(self) -> float | None:
        """The pointer's x when it is over the rows (W/S zoom around it), else None (the centre)."""
        pos = self.mapFromGlobal(QCursor.pos())
        if GUTTER <= pos.x() < GUTTER + self.plot_width() and 0 <= pos.y() < self.height():
            return float(pos.x())
        return None

    def wheelEvent(self, event) -> None:
        delta = event.angleDelta().y() or event.angleDelta().x()
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.pan_px(0, delta / 2)
        else:
            self.zoom(ZOOM_STEP ** (delta / 120.0), event.position().x())
        event.accept()

    def keyPressEvent(self, event) -> None:
        key, step = event.key(), self.plot_width() * 0.15
        actions = {
            Qt.Key.Key_Plus: lambda: self.zoom(ZOOM_STEP), Qt.Key.Key_Equal: lambda: self.zoom(ZOOM_STEP),
            Qt.Key.Key_Minus: lambda: self.zoom(1 / ZOOM_STEP), Qt.Key.Key_Home: self.reset_view,
            Qt.Key.Key_W: lambda: self.zoom(ZOOM_STEP, self._cursor_x()),
            Qt.Key.Key_S: lambda: self.zoom(1 / ZOOM_STEP, self._cursor_x()),
            Qt.Key.Key_A: lambda: self.pan_px(step), Qt.Key.Key_D: lambda: self.pan_px(-step),
            Qt.Key.Key_Escape: self._escape,
            Qt.Key.Key_Left: lambda: self.pan_px(step), Qt.Key.Key_Right: lambda: self.pan_px(-step),
            Qt.Key.Key_Up: lambda: self.pan_px(0, 3 * ROW_H), Qt.Key.Key_Down: lambda: self.pan_px(0, -3 * ROW_H),
            Qt.Key.Key_PageUp: lambda: self.pan_px(0, self.height() * 0.8),
            Qt.Key.Key_PageDown: lambda: self.pan_px(0, -self.height() * 0.8),
        }
        if key in actions and not event.modifiers() & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier):
            actions[key]()
            event.accept()
        else:
            super().keyPressEvent(event)

    def _escape(self) -> None:
        """Esc: clear the measure; pressed again, the highlight and the selection."""
        if self._measure is not None:
            self.clear_measure()
            return
        self.clear_highlight()
        if self._selected is not None:
            self._selected = None
            self.update()

    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = event.position().toPoint()
            self._press_x = event.position().x()
            self._press_view = (self._t0, self._scroll_y)
            self._dragged = False
            # shift+drag on the rows, or a drag on the time axis: measure
            self._measuring = self._press.x() >= GUTTER and (
                bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier) or self._press.y() < AXIS_H)
        self.setFocus()

    def mouseMoveEvent(self, event) -> None:
        pos = event.position().toPoint()
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            d = pos - self._press
            if self._measuring:
                if self._dragged or abs(d.x()) > 2:
                    self._dragged = True
                    self.measure_span(self.time_at(self._press_x), self.time_at(max(GUTTER, event.position().x())),
                                      emit=False)
                return
            if self._dragged or abs(d.x()) + abs(d.y()) > 3:
                self._dragged = True
                self._auto_fit = False
                self._t0 = self._press_view[0] - d.x() * self._nspp
                self._scroll_y = self._press_view[1] - d.y()
                self._clamp()
                self.update()
                if d.x():
                    self.sigViewChanged.emit(*self.view_range())
            return
        item = self.item_at(pos)
        if item is None and pos.x() < GUTTER:
            s = self.slot_at(pos.y())
            if s is not None:
                text = s.block.full_name + (f" (pid {s.block.pid})" if s.block.pid != L.GPUS_PID else "")
                if s.lane is not None:
                    text += f"\n{s.lane.label}" + (" — gpuscope's own records" if s.lane.source else "")
                QToolTip.showText(event.globalPosition().toPoint(), text, self)
                return
        if item is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(event.globalPosition().toPoint(), TT.tooltip_html(self.details(item)), self)

    def mouseReleaseEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self._press is not None:
            if self._measuring and self._dragged:
                x = max(GUTTER, event.position().x())
                self.measure_span(self.time_at(self._press_x), self.time_at(x))
            elif not self._dragged:
                self.select_at(event.position())
            else:
                self.sigViewChanged.emit(*self.view_range())
            self._press = None
            self._measuring = False

    def mouseDoubleClickEvent(self, event) -> None:
        item = self.item_at(event.position())
        if item is not None:
            d = self.details(item)
            pad = max(d["duration_ns"] * 0.1, 1.0)
            self.set_view(d["start_ns"] - pad, d["end_ns"] + pad)


def _row_table(lane: L.Lane) -> str:
    """The Timeline table a lane's rows index (GPU lanes: kernels and memops, by ``is_memop``)."""
    return {L.KIND_NVTX: "ranges", L.KIND_API: "cuda_api", L.KIND_OSRT: "osrt",
            L.KIND_GPU_SHARE: "gpu_share"}.get(lane.kind, "kernels")


def _one(n: int, index: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[index] = True
    return mask
