"""QtTimeline: the timeline view, a QWidget painting a Timeline with QPainter.

One lane per process thread (NVTX ranges, a row per nesting depth, then its CUDA API and OS
runtime calls) and per GPU stream (kernels, memory operations). Level of detail comes from
:mod:`gpuscope.views.timeline_lod`: items narrower than a pixel are merged into blocks, so a frame
costs about the same for a thousand ranges as for a million. Wheel / Ctrl+wheel / ``+`` ``-`` /
W S zoom, drag, arrow keys and A D pan, Home resets, hover shows a tooltip, a click selects a range
and emits :attr:`QtTimeline.sigRangeSelected`. Shift+drag (or a drag on the time axis) measures a
span (:attr:`QtTimeline.sigMeasured`), Esc clears it; :meth:`QtTimeline.highlight_name` highlights
the items of a summary row and shows the longest. What is in view, under a position, selected or
highlighted is the Qt-free :class:`gpuscope.views.timeline_viewport.Viewport` (``vp``); the widget
paints it and turns input into its calls.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QCursor, QPainter, QPen
from PySide6.QtWidgets import QScrollBar, QSizePolicy, QToolTip, QWidget

from gpuscope.app.timeline.qt_timeline_paint import (RowPainter, paint_axis, paint_focus, paint_flows, paint_gutter,
                                                     paint_highlight, paint_measure)
from gpuscope.trace import timeline as T
from gpuscope.views import timeline_lod as L
from gpuscope.views import timeline_query as Q
from gpuscope.views import timeline_text as TT
from gpuscope.views.timeline_viewport import (AXIS_H, FLOWS_MAX, GUTTER, LANE_GAP, MARK_H, MIN_NS_PER_PX, PROC_H,
                                              ROW_H, Item, Slot, Viewport)

ZOOM_STEP = 1.25
__all__ = ["AXIS_H", "FLOWS_MAX", "GUTTER", "LANE_GAP", "MARK_H", "MIN_NS_PER_PX", "PROC_H", "ROW_H", "ZOOM_STEP",
           "QtTimeline", "Slot"]


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
        self.vp = Viewport(lambda: (self.width(), self.height(), self.vbar.sizeHint().width()))
        self._press: QPoint | None = None
        self._press_x = 0.0
        self._press_view: tuple[float, int] = (0.0, 0)
        self._dragged = False
        self._domains: dict[tuple[int, int], str] = {}
        self._measuring = False                       # a measure drag is in progress
        self._measure: Q.Measure | None = None
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
        self.vp.set_layout(layout)
        self._measure = None
        self._domains = layout.timeline.domain_names() if layout is not None else {}
        self.fit()

    @property
    def layout_model(self) -> L.TimelineLayout | None:
        return self.vp.layout

    @property
    def timeline(self) -> T.Timeline | None:
        return self.vp.layout.timeline if self.vp.layout is not None else None

    @property
    def ns_per_px(self) -> float:
        return self.vp.nspp

    @property
    def scroll_y(self) -> int:
        return self.vp.scroll_y

    def content_height(self) -> int:
        """Pixels the axis and all lanes need."""
        return AXIS_H + self.vp.content_h

    def slots(self) -> list[Slot]:
        return list(self.vp.slots)

    # ----------------------------------------------------------------- view

    def sizeHint(self) -> QSize:
        return QSize(900, 400)

    def plot_width(self) -> int:
        return self.vp.plot_width()

    def view_range(self) -> tuple[float, float]:
        return self.vp.view_range()

    def _changed(self, view: bool = True) -> None:
        """After the viewport changed: the scroll bar follows, repaint, and say the new span."""
        self._sync_bar()
        self.update()
        if view:
            self.sigViewChanged.emit(*self.vp.view_range())

    def set_view(self, t0: float, t1: float) -> None:
        """Show the time span [t0, t1] (ns on the timeline's base)."""
        self.vp.auto_fit = False
        self.vp.apply_view(t0, t1)
        self._changed()

    def set_extent(self, extent: tuple[float, float] | None) -> None:
        """The time span Home fits and zoom/pan stay near (default: the timeline's own span).

        Timelines stacked on one shared axis (the compare view) all get the span of the longest."""
        self.vp.extent = extent
        if self.vp.auto_fit:
            self.fit()
        else:
            self.vp.clamp()
            self._changed(view=False)

    def reset_view(self) -> None:
        """Home: everything fitted, lanes scrolled to the top."""
        self.vp.scroll_y = 0
        self.fit()

    def time_at(self, x: float) -> float:
        """The time (ns on the timeline's base) at a widget x position."""
        return self.vp.time_at(x)

    def fit(self) -> None:
        """Show everything (Home); stays fitted through resizes until the user zooms or pans."""
        self.vp.fit()
        self._changed()

    def zoom(self, factor: float, anchor_x: float | None = None) -> None:
        """Zoom in (factor > 1) or out around a widget x position (default: the centre)."""
        self.vp.zoom(factor, anchor_x)
        self._changed()

    def pan_px(self, dx: float, dy: float = 0.0) -> None:
        """Move the content by (dx, dy) pixels (positive dx shows earlier times)."""
        self.vp.pan(dx, dy)
        self._changed()

    def _sync_bar(self) -> None:
        need = self.vp.needs_bar()
        if need:
            w, visible_h = self.vbar.sizeHint().width(), self.vp.visible_h
            self.vbar.setGeometry(self.width() - w, AXIS_H, w, max(10, visible_h))
            self.vbar.blockSignals(True)
            self.vbar.setRange(0, self.vp.scroll_top())
            self.vbar.setPageStep(max(1, visible_h))
            self.vbar.setSingleStep(ROW_H)
            self.vbar.setValue(self.vp.scroll_y)
            self.vbar.blockSignals(False)
        self.vbar.setVisible(need)

    def _on_vbar(self, value: int) -> None:
        self.vp.scroll_y = value
        self.update()

    # ----------------------------------------------------------------- hit testing

    def slot_at(self, y: float) -> Slot | None:
        return self.vp.slot_at(y)

    def item_at(self, pos: QPoint | QPointF) -> Item | None:
        """(lane, row, level-0 position) of the item under a widget position, or None."""
        return self.vp.item_at(pos.x(), pos.y())

    def details(self, item: Item) -> dict[str, Any]:
        assert self.vp.layout is not None
        return TT.range_details(self.vp.layout, *item, self._domains)

    def position_of(self, kind: str, index: int) -> QPointF | None:
        """Widget position of the middle of a range/kernel/mark (by timeline index)."""
        at = self.vp.position_of(kind, index)
        return None if at is None else QPointF(*at)

    def select_at(self, pos: QPoint | QPointF) -> dict[str, Any] | None:
        item = self.item_at(pos)
        self.vp.selected = item
        self.update()
        if item is None:
            return None
        d = self.details(item)
        self.sigRangeSelected.emit(d)
        return d

    @property
    def selected(self) -> dict[str, Any] | None:
        return self.details(self.vp.selected) if self.vp.selected is not None else None

    # ----------------------------------------------------------------- flows

    def set_flows(self, flows: Any) -> None:
        """Arrows from a pool job's submission to each of its tasks (``gpuscope.trace.flows.Flows``)."""
        if self.vp.layout is not None:
            self.vp.layout.flows = flows
            self.update()

    @property
    def flows(self) -> Any:
        return self.vp.layout.flows if self.vp.layout is not None else None

    def flow_y(self, pid: int, tid: int) -> float | None:
        """Widget y where a flow meets thread (pid, tid): its first NVTX row, else its process header."""
        return self.vp.flow_y(pid, tid)

    def visible_flows(self) -> np.ndarray:
        """Indexes of the flows drawn in this view: those crossing it, when at most FLOWS_MAX do."""
        return self.vp.visible_flows()

    # ----------------------------------------------------------------- measure

    @property
    def measure(self) -> Q.Measure | None:
        """The measured span and what it holds (None when nothing is measured)."""
        return self._measure

    def measure_span(self, t0: float, t1: float, emit: bool = True) -> Q.Measure | None:
        """Measure [t0, t1] (as a shift-drag does): its duration and, per name, the items in it."""
        if self.vp.layout is None:
            return None
        self._measure = Q.measure(self.vp.layout.timeline, t0, t1, self.vp.layout.names)
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
        hl = self.vp.highlight
        return None if hl is None else (hl[0], np.flatnonzero(hl[1]))

    def highlight_name(self, summary_key: str, name: str, naming: str = "plain", jump: bool = True) -> int:
        """Highlight the items of a summary row (tab ``summary_key``: nvtx, kernel, memop, cuda_api,
        osrt; ``name`` as the table prints it) and, with ``jump``, show and select the longest.
        Returns how many items are highlighted."""
        if self.vp.layout is None:
            return 0
        table, index = Q.matching(self.vp.layout.timeline, summary_key, name, naming, self.vp.layout.names)
        self.highlight(table, index, jump)
        return len(index)

    def highlight(self, table: str, index: np.ndarray, jump: bool = True) -> None:
        """Highlight items of a Timeline table (``ranges``, ``kernels``, ``memops``, ``cuda_api``,
        ``osrt``) by index; with ``jump``, zoom to the longest, scroll its lane into view, select it."""
        self.vp.set_highlight(table, index)
        if jump and self.vp.highlight is not None and self.vp.layout is not None:
            picked = self.vp.jump_to(table, Q.longest(self.vp.layout.timeline, table, np.asarray(index)))
            if picked is not None:
                self._changed()
                self.sigRangeSelected.emit(self.details(picked))
        self.update()

    def clear_highlight(self) -> None:
        if self.vp.highlight is not None:
            self.vp.set_highlight("", np.zeros(0, np.int64))
            self.update()

    # ----------------------------------------------------------------- painting

    def paintEvent(self, event) -> None:
        started = time.perf_counter()
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), QColor(250, 250, 250))
            if self.vp.layout is None:
                p.setPen(QColor(110, 110, 110))
                p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No timeline: open a report or run with nsys")
                return
            self._paint_rows(p)
            paint_gutter(self, p, self.vp.visible_slots())
            paint_axis(self, p)
            if self._measure is not None:
                paint_measure(self, p, self._measure)
            if self.hasFocus():
                paint_focus(self, p)
        finally:
            p.end()
        self.last_paint_ms = (time.perf_counter() - started) * 1000.0

    def _paint_rows(self, p: QPainter) -> None:
        vp, layout = self.vp, self.vp.layout
        assert layout is not None
        t0, _ = vp.view_range()
        w = vp.plot_width()
        p.save()
        p.setClipRect(QRectF(GUTTER, AXIS_H, w, self.height() - AXIS_H))
        hatch = layout.mixed_sources
        for s in vp.visible_slots():
            y = vp.y_of(s)
            if s.row is None:
                p.fillRect(QRectF(GUTTER, y, w, s.h), QColor(232, 236, 242))
                continue
            gs = hatch and s.lane is not None and s.lane.source == T.SOURCE_GPUSCOPE \
                and s.lane.kind == L.KIND_NVTX
            self.painter.paint_row(p, s.row, layout.timeline, t0, vp.nspp, GUTTER, y + 1,
                                   s.h - 2, w, hatched=gs)
            if s.depth == 0 and s.lane is not None and s.lane.marks is not None:
                self.painter.paint_marks(p, s.lane, layout.timeline, t0, vp.nspp, GUTTER, y, w)
        if vp.highlight is not None:
            paint_highlight(self, p, vp.visible_slots(), vp.hl_rows, t0)
        paint_flows(self, p, vp.visible_flows())
        if vp.selected is not None:
            self._paint_selection(p, vp.selected)
        p.restore()

    def _paint_selection(self, p: QPainter, selected: Item) -> None:
        lane, row, i = selected
        if row is None:   # a mark
            at = self.vp.mark_position(int(lane.mark_ref[i])) if lane.mark_ref is not None else None
            if at is not None:
                p.setPen(QPen(QColor(0, 0, 0), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawEllipse(QPointF(*at), MARK_H, MARK_H)
            return
        for s in self.vp.slots:
            if s.row is row:
                lv = row.levels[0]
                x0, x1 = self.vp.x_of(lv.start[i]), self.vp.x_of(lv.end[i])
                y = self.vp.y_of(s)
                p.setPen(QPen(QColor(0, 0, 0), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(QRectF(x0 - 1, y, max(x1 - x0, 1) + 2, s.h))
                return

    # ----------------------------------------------------------------- input

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.vp.auto_fit:
            self.fit()    # e.g. laid out while its tab was hidden
        else:
            self.vp.clamp()
            self._changed(view=False)

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
        chord = event.modifiers() & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier)
        if key in actions and not chord:
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
        if self.vp.selected is not None:
            self.vp.selected = None
            self.update()

    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = event.position().toPoint()
            self._press_x = event.position().x()
            self._press_view = (self.vp.t0, self.vp.scroll_y)
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
                self.vp.auto_fit = False
                self.vp.t0 = self._press_view[0] - d.x() * self.vp.nspp
                self.vp.scroll_y = self._press_view[1] - d.y()
                self.vp.clamp()
                self._changed(view=bool(d.x()))
            return
        item = self.item_at(pos)
        if item is None and pos.x() < GUTTER:
            s = self.slot_at(pos.y())
            if s is not None and self.vp.layout is not None:
                text = s.block.full_name + (f" (pid {s.block.pid})" if s.block.pid != L.GPUS_PID else "")
                if s.lane is not None:
                    text += f"\n{s.lane.label}" + TT.lane_note(s.lane, self.vp.layout.timeline)
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
