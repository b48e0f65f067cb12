"""Start-up breakdown per worker, as horizontal bars on one millisecond axis for all labels.

Each :class:`gpuscope.analysis.comparison.WorkerStartup` holds (instant, ms since its first
instant, the parent's ``start()`` call) in order; the bar of a worker runs from its first instant
to its last, one coloured segment per stretch of work between two instants, named for that work
(:mod:`gpuscope.views.startup_segments`: "re-importing __main__" ends at "__main__ re-imported"),
so fork's short bars and spawn's long re-import sit one above the other. The legend lists the
same names; hover names the segment and its milliseconds.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gpuscope.app.compare.qt_compare_tables import short_label
from gpuscope.views import timeline_text as TT
from gpuscope.views.startup_segments import Segment, describe, legend, segments

ROW_H = 18
LEGEND_H = 18     # per legend line (the legend wraps to the widget's width)
AXIS_H = 18
LEFT = 190
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")


class QtStartupBars(QWidget):
    """Paints ``set_startup(list[WorkerStartup], labels)``; ``rows()`` lists what is drawn."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self._workers: list[Any] = []
        self._phases: list[str] = []
        self._max_ms = 1.0
        self.top = LEGEND_H + 4

    def set_startup(self, workers: list[Any], labels: list[str]) -> None:
        order = {label: i for i, label in enumerate(labels)}
        self._workers = sorted((w for w in workers if w.phases),
                               key=lambda w: (order.get(w.label, len(order)), w.phases[0][1], w.pid))
        self._phases = legend(w.phases for w in self._workers)      # segment names, as drawn
        self._max_ms = max([1.0, *(w.phases[-1][1] for w in self._workers)])
        self._relayout()

    def _legend(self, width: int) -> list[tuple[float, float, str]]:
        """(x, y, phase) of each legend entry, wrapped to ``width``."""
        fm = QFontMetrics(self.font())
        out, x, y = [], 6.0, 6.0
        for name in self._phases:
            w = 16 + fm.horizontalAdvance(name) + 14
            if x > 6 and x + w > width:
                x, y = 6.0, y + LEGEND_H
            out.append((x, y, name))
            x += w
        return out

    def _relayout(self) -> None:
        legend = self._legend(max(200, self.width()))
        self.top = int((legend[-1][1] if legend else 6) + LEGEND_H)
        self.setMinimumHeight(self._height())
        self.updateGeometry()
        self.update()

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._relayout()

    def rows(self) -> list[tuple[str, int, list[tuple[str, float]]]]:
        """(label, pid, instants) per drawn bar, top to bottom."""
        return [(w.label, w.pid, list(w.phases)) for w in self._workers]

    def legend_names(self) -> list[str]:
        """The legend's entries, left to right: the names of the segments drawn."""
        return list(self._phases)

    def segment_color(self, name: str) -> QColor:
        return self._color(name)

    def _height(self) -> int:
        return self.top + AXIS_H + max(1, len(self._workers)) * ROW_H + 6

    def sizeHint(self) -> QSize:
        return QSize(500, self._height())

    def _color(self, phase: str) -> QColor:
        return QColor(PALETTE[self._phases.index(phase) % len(PALETTE)])

    def _x(self, ms: float) -> float:
        return LEFT + ms / self._max_ms * max(10, self.width() - LEFT - 12)

    def paintEvent(self, event: Any) -> None:
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), QColor(250, 250, 250))
            fm = QFontMetrics(self.font())
            if not self._workers:
                p.setPen(QColor(110, 110, 110))
                p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter,
                           "No start-up phases recorded (workers need gpuscope's event logs)")
                return
            for x, ly, name in self._legend(self.width()):
                p.fillRect(QRectF(x, ly, 12, 10), self._color(name))
                p.setPen(QColor(50, 50, 60))
                p.drawText(QPointF(x + 16, ly + 10), name)
            self._paint_axis(p)
            for i, w in enumerate(self._workers):
                y = self.top + AXIS_H + i * ROW_H
                if i and w.label != self._workers[i - 1].label:
                    p.setPen(QColor(190, 195, 205))
                    p.drawLine(QPointF(4, y), QPointF(self.width() - 4, y))
                p.setPen(QColor(40, 40, 50))
                text = fm.elidedText(f"{short_label(w.label)} · {w.role} {w.pid}", Qt.TextElideMode.ElideRight,
                                     LEFT - 10)
                p.drawText(QRectF(6, y, LEFT - 10, ROW_H), Qt.AlignmentFlag.AlignVCenter, text)
                for seg in segments(w.phases):
                    x0, x1 = self._x(seg.start_ms), self._x(seg.end_ms)
                    p.fillRect(QRectF(x0, y + 3, max(1.0, x1 - x0), ROW_H - 6), self._color(seg.name))
                t_last = w.phases[-1][1]        # the last instant: a dark tick where the bar ends
                p.fillRect(QRectF(self._x(t_last) - 1, y + 2, 2, ROW_H - 4), QColor(60, 60, 70))
        finally:
            p.end()

    def _paint_axis(self, p: QPainter) -> None:
        y = self.top + AXIS_H - 4
        p.setPen(QColor(120, 120, 130))
        p.drawLine(QPointF(LEFT, y), QPointF(self.width() - 12, y))
        step = TT.nice_step(self._max_ms / 6)
        t = 0.0
        fm = QFontMetrics(self.font())
        while t <= self._max_ms * 1.0001:
            x = self._x(t)
            p.drawLine(QPointF(x, y - 4), QPointF(x, y))
            label = f"{t:g} ms"
            if x + 2 + fm.horizontalAdvance(label) < self.width():
                p.drawText(QPointF(x + 2, y - 4), label)
            t += step
        first = self._workers[0].phases[0][0]
        p.drawText(QRectF(6, self.top, LEFT - 10, AXIS_H - 4), Qt.AlignmentFlag.AlignVCenter,
                   fm.elidedText(f"ms since “{first}”", Qt.TextElideMode.ElideRight, LEFT - 10))

    def segment_at(self, x: float, y: float) -> tuple[Any, Segment] | None:
        """(worker, segment) under a widget position, or None (the nearest within 2 px)."""
        i = int((y - self.top - AXIS_H) // ROW_H)
        if y < self.top + AXIS_H or not 0 <= i < len(self._workers):
            return None
        w = self._workers[i]
        near = [(0.0 if self._x(s.start_ms) <= x <= self._x(s.end_ms) else
                 min(abs(x - self._x(s.start_ms)), abs(x - self._x(s.end_ms))), k, s)
                for k, s in enumerate(segments(w.phases))]
        best = min(near, default=None)
        return (w, best[2]) if best is not None and best[0] <= 2 else None

    def tooltip_at(self, x: float, y: float) -> str | None:
        """What hovering there shows: the worker, the segment's name and milliseconds."""
        hit = self.segment_at(x, y)
        if hit is None:
            return None
        w, seg = hit
        return f"{w.label} · {w.role} pid {w.pid} (run {w.run_id})\n{describe(seg, w.phases[0][0])}"

    def mouseMoveEvent(self, event: Any) -> None:
        pos = event.position()
        text = self.tooltip_at(pos.x(), pos.y())
        if text is None:
            QToolTip.hideText()
            return
        QToolTip.showText(event.globalPosition().toPoint(), text, self)
