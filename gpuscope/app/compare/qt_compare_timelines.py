"""The compare view's timelines: one representative run per label, stacked on one shared time axis.

Each run's timeline starts at its own ``t = 0`` (the first process start for gpuscope's event logs,
the session start for an nsys export), so the runs line up from their start and spawn's start-up
gap shows at a glance. Every :class:`~gpuscope.app.timeline.qt_timeline.QtTimeline` gets the same extent
(the longest run's span); zoom and pan in one move all of them to the same first instant and the
same nanoseconds per pixel, so a time is at the same x in every lane even when one of them shows
a vertical scroll bar.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from gpuscope.app.remote.core import core
from gpuscope.app.timeline.qt_timeline import QtTimeline

MIN_LANE_H = 90      # px: below this a lane stops shrinking and the stack scrolls


def load_layouts(run_dirs: dict[str, str], cancel: Any = None) -> dict[str, Any]:
    """label -> TimelineLayout, or the one-line reason it has none (a pool thread calls this)."""
    from gpuscope.views import timeline_lod as L
    from gpuscope.errors import UserError

    out: dict[str, Any] = {}
    for label, run_dir in run_dirs.items():
        try:
            out[label] = L.build_layout(core().load_report(run_dir, cancel=cancel).timeline)
        except UserError as exc:
            out[label] = str(exc)
    return out


class _Lane(QWidget):
    """A title line ("spawn · run 20261201-… ") above one timeline."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel(title)
        self.title.setStyleSheet("font-weight: bold; padding: 2px 4px;")
        self.timeline = QtTimeline()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 4)
        lay.setSpacing(0)
        lay.addWidget(self.title)
        lay.addWidget(self.timeline, 1)

    def fit_height(self, room: int) -> None:
        """As tall as its processes need, at most ``room`` px (then the timeline scrolls inside)."""
        self.timeline.setFixedHeight(max(MIN_LANE_H, min(room, self.timeline.content_height() + 6)))


class QtStackedTimelines(QWidget):
    """Timelines of several runs, one above the other, on one shared and synchronised x axis."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lanes: dict[str, _Lane] = {}
        self._syncing = False
        self.note = QLabel("Timelines: loading…")
        self.note.setStyleSheet("color: palette(mid); padding: 2px 4px;")
        self.stack = QWidget()
        self.stack_layout = QVBoxLayout(self.stack)
        self.stack_layout.setContentsMargins(0, 0, 0, 0)
        self.stack_layout.setSpacing(2)
        self.stack_layout.addStretch(1)
        self.lanes_scroll = QScrollArea()
        self.lanes_scroll.setWidgetResizable(True)
        self.lanes_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.lanes_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.lanes_scroll.setWidget(self.stack)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        lay.addWidget(self.lanes_scroll, 1)

    @property
    def timelines(self) -> dict[str, QtTimeline]:
        return {label: lane.timeline for label, lane in self.lanes.items()}

    def clear(self, text: str = "") -> None:
        for lane in self.lanes.values():
            lane.setParent(None)
            lane.deleteLater()
        self.lanes = {}
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def set_layouts(self, layouts: dict[str, Any], titles: dict[str, str]) -> None:
        """``layouts``: label -> TimelineLayout or a one-line reason; ``titles``: label -> lane title."""
        self.clear()
        missing = []
        for label, layout in layouts.items():
            lane = _Lane(titles.get(label, label))
            self.lanes[label] = lane
            self.stack_layout.insertWidget(self.stack_layout.count() - 1, lane)
            if isinstance(layout, str):
                missing.append(f"{label}: {layout}")
                lane.timeline.set_layout(None)
            else:
                lane.timeline.set_layout(layout)
            lane.timeline.sigViewChanged.connect(lambda _a, _b, src=lane.timeline: self._follow(src))
        self._fit_lanes()
        real = [v for v in layouts.values() if not isinstance(v, str)]
        extent = (float(min([0, *(v.t_min for v in real)])), float(max(v.t_max for v in real))) if real else None
        for lane in self.lanes.values():
            lane.timeline.set_extent(extent)
        text = "Shared time axis: each run from its own start (t = 0). Zoom or pan one, all follow; Home fits."
        self.note.setText(text + ("  No timeline for " + "; ".join(missing) if missing else ""))
        self.note.setVisible(True)

    def _fit_lanes(self) -> None:
        """Every lane on screen at once: the height shared out, no lane taller than it needs."""
        if not self.lanes:
            return
        titles = sum(lane.title.sizeHint().height() + 6 for lane in self.lanes.values())
        room = (self.lanes_scroll.viewport().height() - titles) // len(self.lanes)
        for lane in self.lanes.values():
            lane.fit_height(room)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._fit_lanes()

    def fit(self) -> None:
        for tl in self.timelines.values():
            tl.fit()

    def _follow(self, source: QtTimeline) -> None:
        """Put every other timeline at the source's first instant and scale."""
        if self._syncing:
            return
        self._syncing = True
        try:
            t0, _ = source.view_range()
            for tl in self.timelines.values():
                if tl is not source:
                    tl.set_view(t0, t0 + source.ns_per_px * tl.plot_width())
        finally:
            self._syncing = False
