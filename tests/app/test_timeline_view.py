"""QtTimeline on real runs (spawn Pool(2) recorded by ``gpuscope run``) and on a large synthetic
Timeline built through the real classes: lanes, nesting, pixels, zoom/pan/keys, hover, selection, LOD."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QMouseEvent, QWheelEvent

from gpuscope.views import timeline_lod as L
from gpuscope.app.timeline.qt_timeline import AXIS_H, GUTTER, ZOOM_STEP, QtTimeline
from gpuscope.nsys.report import load_report
from gpuscope.trace import timeline as T
from tests.app.timeline_support import gpuscope_run, save_shot, shown_timeline, synthetic_timeline, write_workload

pytestmark = pytest.mark.gui
BACKGROUND = QColor(250, 250, 250).rgb()


@pytest.fixture(scope="module")
def spawn_run(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("spawnrun")
    return gpuscope_run(write_workload(folder), home=folder / "home")


@pytest.fixture
def view(qtbot, spawn_run):
    return shown_timeline(qtbot, spawn_run["run_dir"])


def _ranged(summary: dict) -> dict[int, dict]:
    return {p["pid"]: p for p in summary["processes"] if p["ranges"] > 0}


def test_three_processes_have_lanes_with_their_ranges_drawn(view, spawn_run, tmp_path):
    ranged = _ranged(spawn_run)
    assert len(ranged) == 3, spawn_run["processes"]     # main + two spawn pool workers
    lay = view.layout_model
    with_lanes = {b.pid for b in lay.processes if b.lanes}
    assert with_lanes == set(ranged)
    tl = view.timeline
    img = view.grab().toImage()
    for pid, proc in ranged.items():
        mine = np.flatnonzero(tl.ranges.pid == pid)
        assert len(mine) == proc["ranges"]
        widest = int(mine[np.argmax(tl.ranges.end_ns[mine] - tl.ranges.start_ns[mine])])
        pt = view.position_of("nvtx", widest)
        assert pt is not None and GUTTER < pt.x() < view.width() and AXIS_H < pt.y() < view.height()
        assert img.pixel(pt.toPoint()) != BACKGROUND, f"range of pid {pid} not painted at {pt}"
    save_shot(view, "timeline-spawn-pool.png", tmp_path)


def test_nested_ranges_sit_on_their_depth_rows_in_script_colours(view):
    tl = view.timeline
    main = next(b for b in view.layout_model.processes if b.lanes and b.lanes[0].tid == b.pid)
    lane = main.lanes[0]
    depths = tl.ranges.depth[(tl.ranges.pid == main.pid) & (tl.ranges.tid == lane.tid)]
    assert len(lane.rows) == int(depths.max()) + 1 >= 3    # epoch > step > forward/backward
    for d, row in enumerate(lane.rows):
        assert (tl.ranges.depth[row.ref] == d).all()
    names = {tl.name(i): c for i, c in zip(lane.rows[2].name_id, lane.rows[2].color)}
    assert names["forward"] & 0xFFFFFF == 0xFFA500 and names["backward"] & 0xFFFFFF == 0xFF0000


def test_click_selects_and_hover_describes_a_range(view, qtbot, tmp_path):
    tl = view.timeline
    i = int(np.flatnonzero(np.array([tl.name(n) == "epoch" for n in tl.ranges.name_id]))[0])
    pt = view.position_of("nvtx", i).toPoint()
    with qtbot.waitSignal(view.sigRangeSelected, timeout=2000) as sig:
        qtbot.mouseClick(view, Qt.LeftButton, pos=pt)
    d = sig.args[0]
    assert d["name"] == "epoch" and d["index"] == i and d["depth"] == 0
    assert d["pid"] == int(tl.ranges.pid[i]) and d["duration_ns"] == int(tl.ranges.end_ns[i] - tl.ranges.start_ns[i])
    assert d["source"] == "gpuscope" and d["color"] == "#0000ff"
    assert view.selected == d
    from gpuscope.views.timeline_text import tooltip_html
    item = view.item_at(pt)
    assert item is not None and "epoch" in tooltip_html(view.details(item))
    assert view.item_at(QPoint(GUTTER - 5, pt.y())) is None
    # zoomed on the second epoch, its first range selected: labels on nested bars
    epochs = np.flatnonzero(np.array([tl.name(n) == "epoch" for n in tl.ranges.name_id]))
    e = int(epochs[np.argsort(tl.ranges.start_ns[epochs])][-1])
    span = int(tl.ranges.end_ns[e] - tl.ranges.start_ns[e])
    view.set_view(tl.ranges.start_ns[e] - span * 0.02, tl.ranges.start_ns[e] + span * 0.55)
    qtbot.mouseClick(view, Qt.LeftButton, pos=view.position_of("nvtx", e).toPoint())
    assert view.selected["index"] == e
    save_shot(view, "timeline-zoomed.png", tmp_path)


def test_zoom_pan_keys_wheel_drag_and_home(view, qtbot):
    t0, t1 = view.view_range()
    qtbot.keyClick(view, Qt.Key_Plus)
    z0, z1 = view.view_range()
    assert (t1 - t0) / (z1 - z0) == pytest.approx(ZOOM_STEP, rel=1e-6)
    qtbot.keyClick(view, Qt.Key_Left)
    assert view.view_range()[0] < z0
    qtbot.keyClick(view, Qt.Key_Minus)
    qtbot.keyClick(view, Qt.Key_Home)
    assert view.view_range() == pytest.approx((t0, t1))
    pos = QPointF(GUTTER + 300, 100)
    wheel = QWheelEvent(pos, view.mapToGlobal(pos), QPoint(), QPoint(0, 120), Qt.NoButton, Qt.NoModifier,
                        Qt.NoScrollPhase, False)
    anchor = t0 + 300 * (t1 - t0) / view.plot_width()
    view.wheelEvent(wheel)
    w0, w1 = view.view_range()
    assert w1 - w0 < t1 - t0 and w0 + 300 * (w1 - w0) / view.plot_width() == pytest.approx(anchor)
    before = view.view_range()[0]
    start, end = QPointF(GUTTER + 400, 120), QPointF(GUTTER + 300, 120)
    for etype, p, btns in ((QEvent.MouseButtonPress, start, Qt.LeftButton),
                           (QEvent.MouseMove, end, Qt.LeftButton), (QEvent.MouseButtonRelease, end, Qt.NoButton)):
        ev = QMouseEvent(etype, p, view.mapToGlobal(p), Qt.LeftButton, btns, Qt.NoModifier)
        {QEvent.MouseButtonPress: view.mousePressEvent, QEvent.MouseMove: view.mouseMoveEvent,
         QEvent.MouseButtonRelease: view.mouseReleaseEvent}[etype](ev)
    assert view.view_range()[0] == pytest.approx(before + 100 * (w1 - w0) / view.plot_width())
    assert view.selected is None    # a drag is not a click


def test_million_ranges_merge_below_a_pixel_and_stay_exact_when_zoomed(qtbot):
    tl = synthetic_timeline(1_000_000, n_procs=4, threads=2)
    assert len(tl.ranges) >= 950_000
    w = QtTimeline()
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.set_timeline(tl)
    w.show()
    qtbot.waitExposed(w)
    rows = [s for s in w.slots() if s.row is not None]
    w.painter.rects_drawn = 0
    w.grab()
    assert 0 < w.painter.rects_drawn <= 2 * w.plot_width() * len(rows)    # bounded by pixels, not ranges
    # Zoomed to ~40 outer ranges: every range wider than a pixel is its own rectangle.
    t0 = float(tl.ranges.start_ns.min())
    w.set_view(t0, t0 + 40 * 800_000)
    s = rows[0]
    lv = s.row.level_for(w.ns_per_px)
    a, b = w.view_range()
    vis = (s.row.levels[0].end >= a) & (s.row.levels[0].start <= b)
    wide = vis & ((s.row.levels[0].end - s.row.levels[0].start) / w.ns_per_px >= 1)
    in_level = (lv.end >= a) & (lv.start <= b)
    assert (lv.count[in_level] == 1).sum() >= wide.sum() > 20
    img = w.grab().toImage()
    pt = w.position_of("nvtx", int(s.row.ref[np.flatnonzero(wide)[3]]))
    assert img.pixel(pt.toPoint()) != BACKGROUND


def test_gpu_stream_lanes_from_kernels(qtbot):
    tl = T.Timeline()
    k = 6
    names = [tl.strings.intern(n) for n in ("gemm", "relu")]
    starts = np.arange(k, dtype=np.int64) * 1000
    tl.kernels = T.Kernels(start_ns=starts, end_ns=starts + 600,
                           pid=np.full(k, 42, np.int32), device=np.zeros(k, np.int32), context=np.ones(k, np.int32),
                           stream=np.array([7, 7, 7, 13, 13, 13], np.int32), correlation=np.arange(k, dtype=np.int64),
                           name_id=np.array(names * 3, np.int32), short_name_id=np.array(names * 3, np.int32),
                           grid=np.ones((k, 3), np.int32), block=np.ones((k, 3), np.int32))
    lay = L.build_layout(tl)
    lanes = [ln for b in lay.processes for ln in b.lanes if ln.kind != L.KIND_GPU_SHARE]   # (tests/gpu)
    assert [(ln.kind, ln.device, ln.stream) for ln in lanes] == [("gpu", 0, 7), ("gpu", 0, 13)]
    w = QtTimeline(tl)
    qtbot.addWidget(w)
    w.resize(800, 200)
    pt = w.position_of("kernel", 4)
    d = w.details(w.item_at(pt))
    assert d["kind"] == "kernel" and d["stream"] == 13 and d["name"] == "gemm" and d["index"] == 4


def test_nvtx_marks_are_drawn_on_their_thread_and_selectable(view, qtbot):
    tl = view.timeline
    assert len(tl.marks) == 1 and tl.name(tl.marks.name_id[0]) == "pool ready"
    lane = next(ln for b in view.layout_model.processes for ln in b.lanes if ln.marks is not None)
    assert lane.pid == int(tl.marks.pid[0]) and lane.tid == int(tl.marks.tid[0])
    pt = view.position_of("mark", 0)
    img = view.grab().toImage()
    assert QColor(img.pixel(pt.toPoint())) == QColor(255, 0, 0)
    with qtbot.waitSignal(view.sigRangeSelected, timeout=2000) as sig:
        qtbot.mouseClick(view, Qt.LeftButton, pos=pt.toPoint())
    d = sig.args[0]
    assert d["kind"] == "mark" and d["name"] == "pool ready" and d["start_ns"] == int(tl.marks.start_ns[0])


def test_lanes_taller_than_the_view_scroll_with_bar_keys_and_drag(view, qtbot):
    view.resize(900, 160)
    qtbot.wait(10)
    view.fit()
    assert view.vbar.isVisible() and view.vbar.maximum() > 0
    first = view.slot_at(AXIS_H + 2)
    qtbot.keyClick(view, Qt.Key_Down)
    assert view.vbar.value() > 0 and view.slot_at(AXIS_H + 2) is not first
    view.vbar.setValue(view.vbar.maximum())
    last = view.slots()[-1]
    assert view.slot_at(view.height() - 12) is last
    qtbot.keyClick(view, Qt.Key_PageUp)
    qtbot.keyClick(view, Qt.Key_PageUp)
    assert view.vbar.value() == 0


def test_stays_fitted_through_resizes_until_the_user_zooms(qtbot, spawn_run):
    w = QtTimeline()
    qtbot.addWidget(w)
    w.resize(300, 200)               # laid out small (e.g. in a hidden tab)
    w.set_timeline(load_report(spawn_run["run_dir"]).timeline)
    fitted = w.view_range()
    w.resize(1200, 480)
    w.show()
    qtbot.waitExposed(w)
    lay = w.layout_model
    t0, t1 = w.view_range()
    assert t0 < lay.t_min and t1 > lay.t_max and (t1 - t0) == pytest.approx(fitted[1] - fitted[0])
    qtbot.keyClick(w, Qt.Key_Plus)
    zoomed = w.view_range()
    w.resize(1000, 480)
    assert w.view_range()[0] == pytest.approx(zoomed[0])     # the user's zoom is kept
