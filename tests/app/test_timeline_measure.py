"""Timeline features on a real run (spawn Pool(2) recorded by ``gpuscope run``): measuring a span by
shift-drag or a drag on the time axis, Esc; a summary row highlights its ranges and shows the
longest; Tab focus with an outline; W/A/S/D and Home; one label and one colour per range name."""

from __future__ import annotations


import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QColor, QMouseEvent
from PySide6.QtWidgets import QApplication, QLineEdit, QVBoxLayout, QWidget

from gpuscope.views import timeline_lod as L
from gpuscope.app import workers
from gpuscope.app.report.qt_report_view import QtReportView
from gpuscope.app.timeline.qt_timeline import AXIS_H, GUTTER, ZOOM_STEP, QtTimeline
from gpuscope.views.timeline_text import fmt_ns
from gpuscope.nsys.report import load_report
from tests.app.timeline_support import EPOCHS, STEPS, TASKS, gpuscope_run, save_shot, shown_timeline, write_workload

pytestmark = pytest.mark.gui
BACKGROUND = QColor(250, 250, 250).rgb()


@pytest.fixture(scope="module")
def spawn_run(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("measurerun")
    return gpuscope_run(write_workload(folder), home=folder / "home")


@pytest.fixture
def view(qtbot, spawn_run):
    return shown_timeline(qtbot, spawn_run["run_dir"])


def _named(tl, name: str, domain: str | None = None) -> np.ndarray:
    """Indexes of the ranges called ``name`` (in NVTX domain ``domain``; None: the default one),
    from the Timeline's own columns (independent of the view's naming code)."""
    doms = tl.domain_names()
    return np.array([i for i in range(len(tl.ranges)) if tl.name(tl.ranges.name_id[i]) == name
                     and doms.get((int(tl.ranges.pid[i]), int(tl.ranges.domain_id[i]))) == domain], dtype=np.int64)


def _drag(view, a: QPointF, b: QPointF, modifiers=Qt.NoModifier) -> None:
    """Press at ``a``, move to ``b`` in steps, release: real mouse events through Qt's dispatch."""
    def send(etype, p, btns):
        ev = QMouseEvent(etype, p, view.mapToGlobal(p), Qt.LeftButton if etype != QEvent.MouseMove else Qt.NoButton,
                         btns, modifiers)
        QApplication.sendEvent(view, ev)
    send(QEvent.MouseButtonPress, a, Qt.LeftButton)
    for f in (0.3, 0.7, 1.0):
        send(QEvent.MouseMove, a + (b - a) * f, Qt.LeftButton)
    send(QEvent.MouseButtonRelease, b, Qt.NoButton)


def _second_epoch(tl) -> int:
    epochs = _named(tl, "epoch")
    return int(epochs[np.argsort(tl.ranges.start_ns[epochs])][-1])


def test_shift_drag_measures_the_span_and_what_it_holds(view, qtbot, tmp_path):
    tl = view.timeline
    e = _second_epoch(tl)
    s, t = float(tl.ranges.start_ns[e]), float(tl.ranges.end_ns[e])
    view.set_view(s - (t - s) * 0.3, t + (t - s) * 0.6)
    x = lambda ns: GUTTER + (ns - view.view_range()[0]) / view.ns_per_px   # noqa: E731
    y = view.position_of("nvtx", e).y()
    a, b = QPointF(x(s) + 2, y), QPointF(x(t) - 2, y)
    t_before = view.view_range()
    with qtbot.waitSignal(view.sigMeasured, timeout=2000) as sig:
        _drag(view, a, b, Qt.ShiftModifier)
    m = sig.args[0]
    assert m is view.measure and view.view_range() == t_before          # a measure is not a pan
    assert view.selected is None                                          # nor a click
    assert m.t0 == round(view.time_at(a.x())) and m.t1 == round(view.time_at(b.x()))
    assert m.duration_ns == pytest.approx(t - s - 4 * view.ns_per_px, abs=2)
    main = {r.name: r for r in m.rows if r.kind == "nvtx"}
    # the workload: per epoch 3 steps of forward + backward, all inside the measured span
    counts = (main["epoch"].count, main["step"].count, main["forward"].count, main["backward"].count)
    assert counts == (1, STEPS, STEPS, STEPS)
    assert main["epoch"].inside_ns == m.duration_ns                       # the epoch covers the whole span
    fw = _named(tl, "forward")
    fw = fw[(tl.ranges.start_ns[fw] <= m.t1) & (tl.ranges.end_ns[fw] >= m.t0)]
    assert main["forward"].total_ns == int((tl.ranges.end_ns[fw] - tl.ranges.start_ns[fw]).sum())
    assert "setup" not in main                                             # before the span
    # drawn: the band over the rows, lighter than the rows' background
    img = view.grab().toImage()
    mid_x = int((a.x() + b.x()) / 2)
    band = QColor(img.pixel(mid_x, view.height() - 3))
    assert band.rgb() != BACKGROUND and band.blue() > band.red()
    save_shot(view, "timeline-measure.png", tmp_path)
    with qtbot.waitSignal(view.sigMeasured, timeout=2000) as sig:
        qtbot.keyClick(view, Qt.Key_Escape)
    assert sig.args[0] is None and view.measure is None
    assert view.grab().toImage().pixel(mid_x, view.height() - 3) == BACKGROUND


def test_a_drag_on_the_time_axis_measures_a_plain_drag_pans(view, qtbot):
    t0, _ = view.view_range()
    a, b = QPointF(GUTTER + 100, AXIS_H / 2), QPointF(GUTTER + 500, AXIS_H / 2)
    _drag(view, a, b)
    m = view.measure
    assert m is not None and m.duration_ns == pytest.approx(400 * view.ns_per_px, abs=2)
    assert view.view_range()[0] == t0
    names = {r.name for r in m.rows}
    assert names, "a span over a fifth of the run holds ranges"
    # right to left measures the same span
    _drag(view, b, a)
    assert view.measure.t0 == m.t0 and view.measure.t1 == m.t1
    qtbot.keyClick(view, Qt.Key_Escape)
    _drag(view, QPointF(GUTTER + 500, 200), QPointF(GUTTER + 400, 200))
    assert view.measure is None and view.view_range()[0] > t0               # panned


def test_focus_by_tab_draws_an_outline_and_wasd_home_move_the_view(qtbot, spawn_run):
    host = QWidget()
    qtbot.addWidget(host)
    edit, view = QLineEdit(host), QtTimeline(parent=host)
    lay = QVBoxLayout(host)
    lay.addWidget(edit)
    lay.addWidget(view, 1)
    host.resize(1000, 500)
    view.set_timeline(load_report(spawn_run["run_dir"]).timeline)
    host.show()
    qtbot.waitExposed(host)
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    corner = QColor(view.grab().toImage().pixel(view.width() // 2, 1))
    qtbot.keyClick(edit, Qt.Key_Tab)
    qtbot.waitUntil(view.hasFocus, timeout=2000)
    outline = QColor(view.grab().toImage().pixel(view.width() // 2, 1))
    assert outline != corner and outline.blue() > 180 and outline.red() < 80
    t0, t1 = view.view_range()
    qtbot.keyClick(view, Qt.Key_W)
    z0, z1 = view.view_range()
    assert (t1 - t0) / (z1 - z0) == pytest.approx(ZOOM_STEP, rel=1e-6)
    qtbot.keyClick(view, Qt.Key_A)
    assert view.view_range()[0] < z0
    qtbot.keyClick(view, Qt.Key_D)
    qtbot.keyClick(view, Qt.Key_D)
    assert view.view_range()[0] > z0
    qtbot.keyClick(view, Qt.Key_S)
    assert view.view_range()[1] - view.view_range()[0] == pytest.approx(t1 - t0, rel=1e-6)
    view.pan_px(0, -60)
    qtbot.keyClick(view, Qt.Key_Home)
    assert view.view_range() == pytest.approx((t0, t1)) and view.scroll_y == 0


def test_one_label_and_one_colour_per_range_name(view, spawn_run):
    """gpuscope's task range of load_batch is ``gpuscope:load_batch``, the script's own range
    ``load_batch``: two labels; a name's palette colour depends only on its text."""
    tl, lay = view.timeline, view.layout_model
    task, mine = _named(tl, "load_batch", "gpuscope"), _named(tl, "load_batch")
    assert len(task) == len(mine) == EPOCHS * TASKS
    labels = {}
    for b in lay.processes:
        for lane in b.lanes:
            for row in lane.rows:
                for pos, ref in enumerate(row.ref.tolist()):
                    labels.setdefault(ref, (row.label(pos, tl.strings.values), int(row.color[pos])))
    assert {labels[i][0] for i in task.tolist()} == {"gpuscope:load_batch"}
    assert {labels[i][0] for i in mine.tolist()} == {"load_batch"}
    assert view.details(view.item_at(view.position_of("nvtx", int(task[0]))))["name"] == "gpuscope:load_batch"
    # no script colour on the task range: the palette colour of its name, whatever the string ids
    assert {labels[i][1] for i in task.tolist()} == {L.palette_color("gpuscope:load_batch")}
    assert {labels[i][1] & 0xFFFFFF for i in mine.tolist()} == {0x800080}   # purple, the script's


def test_summary_row_click_highlights_its_ranges_and_shows_the_longest(qtbot, spawn_run, tmp_path):
    rv = QtReportView()
    qtbot.addWidget(rv)
    rv.resize(1300, 900)
    rv.show()
    try:
        with qtbot.waitSignal(rv.sigLoaded, timeout=60_000):
            rv.show_run(spawn_run["run_dir"])
        tl, view = rv.timeline.timeline, rv.timeline
        table = rv.summary.tables["nvtx"]
        names = table.column_values("Name")
        row = names.index("gpuscope:load_batch")
        idx = table.proxy.index(row, 0)
        table.view.scrollTo(idx)
        with qtbot.waitSignal(rv.sigRangeSelected, timeout=2000) as sig:
            qtbot.mouseClick(table.view.viewport(), Qt.LeftButton, pos=table.view.visualRect(idx).center())
        want = _named(tl, "load_batch", "gpuscope")
        kind, got = view.highlighted
        assert kind == "ranges" and sorted(got.tolist()) == sorted(want.tolist())
        assert len(got) == int(table.column_values("Count")[row].replace(",", ""))
        longest = int(want[np.argmax(tl.ranges.end_ns[want] - tl.ranges.start_ns[want])])
        assert sig.args[0]["index"] == longest and view.selected["index"] == longest
        assert sig.args[0]["name"] == "gpuscope:load_batch"
        v0, v1 = view.view_range()
        assert v0 < tl.ranges.start_ns[longest] < tl.ranges.end_ns[longest] < v1
        assert (v1 - v0) < 3 * (tl.ranges.end_ns[longest] - tl.ranges.start_ns[longest])   # zoomed to it
        pt = view.position_of("nvtx", longest)
        assert 0 < pt.y() < view.height()
        img = view.grab().toImage()
        c = QColor(img.pixel(pt.toPoint()))
        assert c.rgb() & 0xFFFFFF == L.palette_color("gpuscope:load_batch") & 0xFFFFFF   # full colour
        # the script's load_batch inside it is not highlighted: dimmed towards the background
        inner = _named(tl, "load_batch")
        inner = int(inner[(tl.ranges.start_ns[inner] >= tl.ranges.start_ns[longest])
                          & (tl.ranges.end_ns[inner] <= tl.ranges.end_ns[longest])][0])
        d = QColor(img.pixel(view.position_of("nvtx", inner).toPoint()))
        assert d.red() > 0x80 and d.green() > 0x80, d.name()          # purple (#800080) lightened
        save_shot(rv, "timeline-highlight.png", tmp_path)
        # a measure over the longest lands in the details pane, with its names
        view.setFocus()
        a_x = view.position_of("nvtx", longest).x() - 40
        _drag(view, QPointF(a_x, AXIS_H / 2), QPointF(a_x + 80, AXIS_H / 2))
        text = rv.details.toPlainText()
        assert view.measure is not None and fmt_ns(view.measure.duration_ns) + " measured" in text
        assert "gpuscope:load_batch" in text
        qtbot.keyClick(view, Qt.Key_Escape)
        assert view.measure is None and rv.details.toPlainText() == ""
        # another row moves the highlight; Esc clears it
        row2 = names.index("load_batch")
        qtbot.mouseClick(table.view.viewport(), Qt.LeftButton,
                         pos=table.view.visualRect(table.proxy.index(row2, 0)).center())
        assert sorted(view.highlighted[1].tolist()) == sorted(_named(tl, "load_batch").tolist())
        view.setFocus()
        qtbot.keyClick(view, Qt.Key_Escape)
        assert view.highlighted is None
    finally:
        assert workers.wait_all(30_000)
