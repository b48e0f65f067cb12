"""The Compare tab's widgets on a Comparison built here with the core's dataclasses (no runs): what the
tables show, sorting and filtering, the start-up bars, the shared and synchronised time axis of the
stacked timelines, exports, and the one-line refusals of the launch panel, History and ``gui``."""

from __future__ import annotations

import json

import pytest
from apphelpers import make_window, script
from PySide6.QtCore import QPoint, QPointF, Qt
from timeline_support import synthetic_timeline

from gpuscope.analysis.comparison import Comparison, Metric, RangeRow, Spread, WorkerStartup
from gpuscope.views import timeline_lod as L

pytestmark = pytest.mark.gui


def _comparison(tmp_path, left_out: dict[str, str] | None = None) -> Comparison:
    wall = Metric("wall_s", "s", {"fork": Spread(1.0, 0.9, 1.1, 2), "spawn": Spread(2.0, 1.9, 2.2, 2)}, 2.0, True,
                  "Wall time", ratios={"spawn": 2.0})
    cpu = Metric("cpu_s", "s", {"fork": Spread(3.0, 2.0, 4.0, 2), "spawn": Spread(3.3, 2.5, 4.1, 2)}, 1.1, False,
                 "CPU time", ratios={"spawn": 1.1})
    uss = Metric("uss_per_worker_bytes", "bytes", {"fork": None, "spawn": Spread(2**24, 2**24, 2**24, 1)}, None,
                 False, "USS per worker")

    def rr(name, fork, spawn, ratio, beyond):
        vals = {label: {"count": c, "total_ns": t, "avg_ns": t / c, "min_total_ns": t * 0.9, "max_total_ns": t * 1.1,
                        "n": 2} for label, (c, t) in (("fork", fork), ("spawn", spawn))}
        return RangeRow(name, vals, ratio, beyond)

    ranges = [rr("work", (8, 2_000_000_000), (8, 2_100_000_000), 1.05, False),
              rr("setup", (1, 200_000_000), (1, 900_000_000), 4.5, True),
              rr("import torch", (3, 50_000_000), (3, 30_000_000), 0.6, False)]
    startup = [WorkerStartup("fork", "r-fork", 11, "pool worker", [("created", 0.0), ("python", 1.0), ("task", 3.0)]),
               WorkerStartup("spawn", "r-spawn", 21, "pool worker",
                             [("created", 0.0), ("python", 80.0), ("task", 120.0)]),
               WorkerStartup("spawn", "r-spawn", 22, "pool worker",
                             [("created", 0.0), ("python", 85.0), ("task", 131.0)])]
    runs = {"fork": ["r-fork", "r-fork2"], "spawn": ["r-spawn", "r-spawn2"]}
    return Comparison(labels=["fork", "spawn"], runs=runs, left_out=dict(left_out or {}), metrics=[wall, cpu, uss],
                      ranges=ranges, verdict="spawn is 2.00× slower than fork here.",
                      warnings=["the runs differ in their arguments: 1 (r-fork), 2 (r-spawn); compared anyway",
                                *(f"run {r} (fork) {why}: shown, left out of the medians"
                                  for r, why in (left_out or {}).items())],
                      notes=["CPU of some processes sampled"], representative={"fork": "r-fork",
                                                                                     "spawn": "r-spawn"},
                      startup=startup, run_dirs={"r-fork": str(tmp_path / "a"), "r-spawn": str(tmp_path / "b")},
                      kind="start methods")


def _view(qtbot):
    from gpuscope.app.compare.qt_compare import QtCompareView

    view = QtCompareView()
    qtbot.addWidget(view)
    view.resize(1280, 900)
    view.show()
    return view


def test_tables_show_the_comparison(qtbot, tmp_path):
    cmp = _comparison(tmp_path, left_out={"r-fork2": "failed (exit 1)"})
    view = _view(qtbot)
    with qtbot.waitSignal(view.sigShown, timeout=30_000):
        view.show_comparison(cmp)
    assert view.verdict.text() == cmp.verdict
    assert view.warnings.isVisible()
    assert "differ in their arguments" in view.warnings.text() and "r-fork2 (fork) failed" in view.warnings.text()
    assert view.warnings.text().count("\n") == 1          # one line per warning
    assert "fork: 1 run(s) (r-fork), 1 left out of the medians" in view.runs_line.text()
    assert "spawn: 2 run(s)" in view.runs_line.text()
    assert view.notes.isVisible() and view.notes.text() == "CPU of some processes sampled"
    figs = view.metrics.figures()
    assert figs["wall_s"] == {"fork": 1.0, "spawn": 2.0, "ratio": 2.0}
    assert figs["uss_per_worker_bytes"] == {"fork": None, "spawn": float(2**24), "ratio": None}
    m = view.metrics
    assert m.horizontalHeaderItem(3).text() == "spawn / fork"
    assert m.item(0, 1).text() == "1 s (0.9 s–1.1 s)" and m.item(0, 3).text() == "2.00×"
    assert m.item(2, 1).text() == "not measured"
    assert m.item(0, 0).background().color().name() != m.item(1, 0).background().color().name()  # beyond noise
    # ranges: numbers under UserRole, sortable by number, filterable by name
    r = view.ranges
    assert r.figures()["setup"]["spawn"] == {"count": 1, "total_ns": 900_000_000, "avg_ns": 900_000_000.0}
    setup_row = next(i for i in range(r.rowCount()) if r.item(i, 0).text() == "setup")
    assert r.item(setup_row, 5).toolTip().startswith("spawn: median of 2 run(s); min 810")
    assert m.item(0, 2).toolTip() == ("median of 2 run(s); min 1.9, max 2.2 s\n"
                                      "beyond noise: the repeats' ranges do not overlap")
    ratio_col = r.columnCount() - 1
    r.sortItems(ratio_col, Qt.SortOrder.DescendingOrder)
    assert [r.item(i, 0).text() for i in range(r.rowCount())] == ["setup", "work", "import torch"]
    r.sortItems(1, Qt.SortOrder.AscendingOrder)       # fork count: 1, 3, 8 (not "1", "3", "8" as text)
    assert [r.item(i, 0).text() for i in range(r.rowCount())] == ["setup", "import torch", "work"]
    view.filter.setText("OR")
    assert r.visible_names() == ["import torch", "work"]
    view.filter.setText("")
    assert len(r.visible_names()) == 3
    # start-up bars: workers in label order, one row each, a phase under the mouse
    bars = view.startup
    assert [(label, pid) for label, pid, _ in bars.rows()] == [("fork", 11), ("spawn", 21), ("spawn", 22)]
    from gpuscope.app.compare.qt_compare_startup import AXIS_H, ROW_H
    y = bars.top + AXIS_H + 1 * ROW_H + ROW_H / 2
    hit = bars.segment_at(bars._x(40.0), y)
    assert hit is not None and hit[0].pid == 21
    assert (hit[1].until, hit[1].start_ms, hit[1].end_ms) == ("python", 0.0, 80.0)   # named for where it ends
    # no event logs in the run folders: a one-line note, no timeline, no traceback
    assert not any(tl.layout_model for tl in view.timelines.timelines.values())
    assert "No timeline for fork:" in view.timelines.note.text()
    assert "Traceback" not in view.timelines.note.text()


def test_exports(qtbot, tmp_path):
    cmp = _comparison(tmp_path)
    view = _view(qtbot)
    assert not view.export_md.isEnabled()
    with qtbot.waitSignal(view.sigShown, timeout=30_000):
        view.show_comparison(cmp)
    assert view.export_md.isEnabled()
    written = view.export_markdown(tmp_path / "out.md")
    text = (tmp_path / "out.md").read_text()
    assert "spawn is 2.00× slower" in text
    assert "![Start-up per worker](out-startup.png)" in text and "(out-timelines.png)" in text
    assert all(p.exists() and p.stat().st_size > 0 for p in written) and len(written) == 3
    view.export_json_to(tmp_path / "out.json")
    assert json.loads((tmp_path / "out.json").read_text()) == json.loads(json.dumps(cmp.to_json()))


def test_stacked_timelines_share_one_axis(qtbot):
    from gpuscope.app.compare.qt_compare_timelines import QtStackedTimelines

    short, long = L.build_layout(synthetic_timeline(4_000, n_procs=2)), L.build_layout(synthetic_timeline(
        40_000, n_procs=2))
    assert long.t_max > 2 * short.t_max
    st = QtStackedTimelines()
    qtbot.addWidget(st)
    st.resize(1000, 700)
    st.show()
    st.set_layouts({"fork": short, "spawn": long}, {"fork": "fork · run a", "spawn": "spawn · run b"})
    qtbot.waitExposed(st)
    a, b = st.timelines["fork"], st.timelines["spawn"]
    assert st.lanes["fork"].title.text() == "fork · run a"

    def same_axis():
        return a.view_range()[0] == pytest.approx(b.view_range()[0]) and a.ns_per_px == pytest.approx(b.ns_per_px)

    st.fit()
    assert same_axis()
    assert a.view_range()[1] >= long.t_max      # the short run is shown on the long run's span
    fitted = b.ns_per_px
    a.zoom(4.0, anchor_x=500)
    assert same_axis() and b.ns_per_px == pytest.approx(fitted / 4)
    b.pan_px(-120)
    assert same_axis()
    before = a.view_range()[0]
    from PySide6.QtTest import QTest
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication
    QTest.mousePress(b, Qt.MouseButton.LeftButton, pos=QPoint(600, 60))
    move = QMouseEvent(QMouseEvent.Type.MouseMove, QPointF(450, 60), b.mapToGlobal(QPointF(450, 60)),
                       Qt.MouseButton.NoButton, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(b, move)
    assert same_axis() and a.view_range()[0] > before      # a drag in one moves the other at once
    QTest.mouseRelease(b, Qt.MouseButton.LeftButton, pos=QPoint(450, 60))
    assert same_axis()
    # a time is at the same x in both, even though only the longer one may need a scroll bar
    t = (a.view_range()[0] + a.view_range()[1]) / 2
    xa = (t - a.view_range()[0]) / a.ns_per_px
    xb = (t - b.view_range()[0]) / b.ns_per_px
    assert xa == pytest.approx(xb)


def test_refusals_are_one_line(qtbot):
    w = make_window(qtbot)
    errors: list[str] = []
    w.sigErrorShown.connect(errors.append)
    p = w.panel
    assert [m for m, box in p.compare_methods.items() if box.isChecked()] == ["fork", "spawn"]
    assert p.repeat.value() == 3
    p.set_script(script("pool_spawn.py"))
    p.compare_methods["spawn"].setChecked(False)
    p.compare_button.click()
    assert errors[-1] == "tick two or three start methods to compare"
    p.compare_methods["spawn"].setChecked(True)
    p.launcher.setCurrentText("torchrun")
    p.compare_button.click()
    assert "python launcher" in errors[-1]
    assert not w.compare.busy
    # History: fewer than two selected runs is a note, not a comparison
    got: list[list[str]] = []
    w.history.sigCompare.connect(got.append)
    w.history.compare_selected()
    assert got == [] and "two or more" in w.history.status.text()
    # the tab is listed and built on first show
    titles = [w.tabs.tabText(i) for i in range(w.tabs.count())]
    assert "Compare" in titles
    w.tabs.setCurrentIndex(titles.index("Compare"))
    assert w.tabs.currentWidget() is w.compare.view
    assert "Nothing compared yet" in w.compare.view.verdict.text()


def test_gui_compare_options_refused():
    import argparse

    from gpuscope.commands import gui

    p = argparse.ArgumentParser()
    gui.add_arguments(p)
    a = p.parse_args(["--run", "x.py", "--compare-methods", "fork,spawn", "--repeat", "2"])
    assert a.compare_methods == ["fork", "spawn"] and a.repeat == 2 and a.screenshot_tab is None
    assert p.parse_args(["--run", "x.py", "--compare-methods", "fork,fork"]).compare_methods == ["fork", "fork"]
    for bad in ("fork", "fork,default", "fork,spawn,forkserver,fork", "fork,thread"):
        with pytest.raises(SystemExit):
            p.parse_args(["--run", "x.py", "--compare-methods", bad])


def test_run_id_labels_are_shortened_in_narrow_places():
    from gpuscope.app.compare.qt_compare_tables import ratio_title, short_label

    assert short_label("20261201-042530-bca58ab9") == "042530-bca58ab9"
    assert short_label("fork") == "fork" and short_label("fork 2") == "fork 2"
    assert ratio_title(["20261201-042530-bca58ab9", "20261201-042531-57787081"]) == "042531-57787081 / 042530-bca58ab9"


def test_where_the_wall_time_goes_is_a_table_beside_the_metrics(qtbot, tmp_path):
    from dataclasses import replace

    parts = [Metric("interpreter", "ms", {"fork": Spread(1.0, 0.8, 1.2, 2), "spawn": Spread(30.0, 28.0, 33.0, 2)},
                    30.0, True, "Worker interpreter start-up", ratios={"spawn": 30.0}),
             Metric("main_reimport", "ms", {"fork": None, "spawn": Spread(245.0, 240.0, 250.0, 2)}, None, False,
                    "Worker re-importing __main__")]
    view = _view(qtbot)
    with qtbot.waitSignal(view.sigShown, timeout=30_000):
        view.show_comparison(_comparison(tmp_path))
    assert not view.metric_tabs.isTabVisible(1)            # no breakdown: no tab
    with qtbot.waitSignal(view.sigShown, timeout=30_000):
        view.show_comparison(replace(_comparison(tmp_path), breakdown=parts))
    assert view.metric_tabs.isTabVisible(1) and view.metric_tabs.tabText(1) == "Where the wall time goes"
    figs = view.breakdown.figures()
    assert figs["main_reimport"] == {"fork": None, "spawn": 245.0, "ratio": None}
    assert figs["interpreter"]["ratio"] == 30.0
    assert view.breakdown.cell(1, 0).text() == "Worker re-importing __main__"
