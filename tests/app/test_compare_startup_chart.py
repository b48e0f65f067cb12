"""The Compare tab's start-up chart: each segment is named (and coloured) for the work it measures,
the legend lists those names, and hovering a segment says its name and milliseconds."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint

from gpuscope.analysis.comparison import WorkerStartup
from tests.app.timeline_support import save_shot

pytestmark = pytest.mark.gui

# instants as gpuscope.analysis.run_figures names them: a spawn worker whose __main__ re-import
# takes ~245 ms, and a fork worker
SPAWN = [("start() called", 0.0), ("process created", 4.0), ("gpuscope's hook", 9.0), ("interpreter ready", 17.0),
         ("__main__ re-imported", 262.0), ("worker loop ready", 264.0), ("first task received", 270.0)]
FORK = [("start() called", 0.0), ("process created", 1.5), ("interpreter ready", 1.6), ("process bootstrap", 2.0),
        ("worker loop ready", 2.4), ("first task received", 17.0)]


@pytest.fixture
def bars(qtbot):
    from gpuscope.app.compare.qt_compare_startup import QtStartupBars

    w = QtStartupBars()
    qtbot.addWidget(w)
    w.resize(900, 160)
    w.set_startup([WorkerStartup("fork", "r-fork", 11, "pool worker", FORK),
                   WorkerStartup("spawn", "r-spawn", 21, "pool worker", SPAWN)], ["fork", "spawn"])
    w.show()
    qtbot.waitExposed(w)
    return w


def _row_y(bars, i: int) -> float:
    from gpuscope.app.compare.qt_compare_startup import AXIS_H, ROW_H

    return bars.top + AXIS_H + i * ROW_H + ROW_H / 2


def test_segments_are_named_for_the_work_they_measure(bars):
    assert bars.legend_names() == ["starting the process", "interpreter start-up", "gpuscope's hook",
                                   "re-importing __main__", "process bootstrap", "worker set-up",
                                   "waiting for the first task"]
    w, seg = bars.segment_at(bars._x(140.0), _row_y(bars, 1))     # the middle of the re-import
    assert w.pid == 21 and seg.name == "re-importing __main__" and (seg.start_ms, seg.end_ms) == (17.0, 262.0)
    # drawn in its own colour, not the colour of "interpreter ready"'s segment before it
    _, before = bars.segment_at(bars._x(13.0), _row_y(bars, 1))
    assert before.name == "gpuscope's hook"
    assert bars.segment_color(seg.name) != bars.segment_color(before.name)
    image = bars.grab().toImage()
    assert image.pixelColor(int(bars._x(140.0)), int(_row_y(bars, 1))) == bars.segment_color("re-importing __main__")


def test_hover_names_the_segment_and_its_milliseconds(qtbot, bars, tmp_path):
    from PySide6.QtWidgets import QToolTip

    text = bars.tooltip_at(bars._x(140.0), _row_y(bars, 1))
    assert text is not None
    assert "spawn · pool worker pid 21 (run r-spawn)" in text
    assert "re-importing __main__: 245.0 ms (from 17.0 to 262.0 ms after “start() called”)" in text
    assert bars.tooltip_at(bars._x(140.0), _row_y(bars, 0)) is None       # past the fork worker's bar
    qtbot.mouseMove(bars, QPoint(int(bars._x(140.0)), int(_row_y(bars, 1))))
    qtbot.waitUntil(lambda: QToolTip.isVisible() and "re-importing __main__" in QToolTip.text(), timeout=5_000)
    save_shot(_with_tooltip(bars), "compare_startup_hover.png", tmp_path)


def _with_tooltip(widget):
    """The widget with the tooltip shown over it drawn in (a grab leaves top-level tips out)."""
    from PySide6.QtGui import QPainter
    from PySide6.QtWidgets import QApplication, QLabel

    tip = next(w for w in QApplication.topLevelWidgets() if w.inherits("QTipLabel") and w.isVisible())
    image = widget.grab()
    painter = QPainter(image)
    painter.drawPixmap(widget.mapFromGlobal(tip.pos()), tip.grab())
    painter.end()
    shot = QLabel()
    shot.setPixmap(image)
    shot.resize(image.size())
    return shot
