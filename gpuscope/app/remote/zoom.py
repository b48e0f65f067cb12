"""A remote report's timeline, page by page as the user zooms: the whole-run view holds the rows
wide enough to see; zoomed in, the rows of the span shown (and half a span either side, for
panning) are pulled from the host at about a pixel's time, added, and the lanes laid out again."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer

from gpuscope.app import workers
from gpuscope.views import timeline_lod as L

SETTLE_MS = 300        # the view must stay this long before a page is asked (a wheel zoom is many steps)
WIDTH_PX = 2000        # a page's rows are at least (span / WIDTH_PX) long


class RemoteZoom(QObject):
    """Watches one report view's timeline; only reports with a ``remote`` source (a RemoteTimeline)."""

    def __init__(self, view: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.view = view
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SETTLE_MS)
        self.timer.timeout.connect(self.fetch)
        self.task: workers.Task | None = None
        self.pulled: list[tuple[int, int, int]] = []    # (t0, t1, min_ns) spans this timeline has
        self._timeline: Any = None
        self.pages = 0                                  # pages that added rows (tests, figures)
        view.timeline.sigViewChanged.connect(lambda _t0, _t1: self.timer.start())

    def fetch(self) -> None:
        """Pull the rows of the span shown, if the timeline does not have them yet."""
        report, widget = self.view.report, self.view.timeline
        source, tl = getattr(report, "remote", None), widget.timeline
        if source is None or tl is None or self.task is not None:
            return
        if tl is not self._timeline:
            self._timeline, self.pulled = tl, []
        t0, t1 = widget.view_range()
        span = t1 - t0
        if not tl.duration_ns or span >= tl.duration_ns / 2:
            return            # the whole-run view has these rows
        a, b, min_ns = int(t0 - span / 2), int(t1 + span / 2), int(span / WIDTH_PX)
        if any(p0 <= a and b <= p1 and pmin <= min_ns for p0, p1, pmin in self.pulled):
            return

        def work(task: workers.Task) -> Any:
            new, added = source.refine(tl, a, b, min_ns)
            return new, added, L.build_layout(new) if added else None

        def done(result: Any) -> None:
            self.task = None
            new, added, layout = result
            self.pulled.append((a, b, min_ns))
            if layout is None or widget.timeline is not tl or self.view.report is not report:
                return
            view = widget.view_range()
            report.loaded = new
            layout.flows = widget.layout_model.flows if widget.layout_model is not None else layout.flows
            widget.set_layout(layout)
            self._timeline = new
            self.pulled.append((a, b, min_ns))
            widget.set_view(*view)
            self.pages += 1

        def failed(text: str) -> None:
            self.task = None
            self.view.sigError.emit(text)

        self.task = workers.submit(work, on_done=done, on_error=failed, label="timeline page")
