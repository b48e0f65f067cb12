"""The report's Torch ops tab (offscreen Qt) on a real 2-rank gloo run with --torch-profile: the
tables as torch prints them, per rank and all ranks, sortable; a row highlights its events on the
timeline and shows the longest; the tab is absent from a run without traces."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import shiboken6
from PySide6.QtCore import Qt

from gpuscope.app import workers
from gpuscope.app.report.qt_report_view import QtReportView
from gpuscope.app.report.qt_torch_ops import QtTorchOps, torch_memory, torch_time
from gpuscope.trace import timeline as T
from tests.views.torch_run import RECORDED_STEPS, torch_run

pytestmark = [pytest.mark.gui, pytest.mark.torch]
LOAD_MS = 60_000


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return torch_run(tmp_path_factory)


@pytest.fixture
def view(qtbot):
    v = QtReportView()
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.show()
    yield v
    assert workers.wait_all(30_000)


def _load(qtbot, view: QtReportView, run: Path) -> QtTorchOps:
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS):
        view.show_run(run)
    assert view.torch_ops is not None
    return view.torch_ops


def _click(qtbot, table, name: str) -> None:
    names = table.column_values("Name")
    row = names.index(name)
    index = table.proxy.index(row, 0)
    table.view.scrollTo(index)
    qtbot.mouseClick(table.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.view.visualRect(index).center())


def test_the_tab_shows_each_ranks_table_as_torch_prints_it(qtbot, view, run_dir):
    tab = _load(qtbot, view, run_dir)
    titles = [view.summary.tabText(i) for i in range(view.summary.count())]
    assert "Torch ops (2 ranks)" in titles
    tl = view.report.timeline
    n_torch = int((tl.ranges.source == T.SOURCE_TORCH).sum())
    assert f"{len(tl.ranges) - n_torch:,} ranges, 0 kernels, {n_torch:,} torch events" in view.title.text()
    boxes = [tab.rank_box.itemText(i) for i in range(tab.rank_box.count())]
    assert boxes[0] == "All 2 ranks" and [b.split(" (")[0] for b in boxes[1:]] == ["rank 0", "rank 1"]
    torch = view.report.torch
    for rank in (0, 1):
        tab.select_rank(rank)
        want = {r.name: r for r in next(x.ops for x in torch.ops.ranks if x.rank == rank)}
        shown = dict(zip(tab.ops.column_values("Name"), tab.ops.column_values("# of Calls")))
        self_cpu = dict(zip(tab.ops.column_values("Name"), tab.ops.column_values("Self CPU")))
        assert set(shown) == set(want)
        for name in ("aten::addmm", "Optimizer.step#SGD.step"):
            assert shown[name] == str(want[name].count) and self_cpu[name] == torch_time(want[name].self_cpu_us)
    tab.select_rank(None)
    both = dict(zip(tab.ops.column_values("Name"), tab.ops.column_values("# of Calls")))
    assert both["Optimizer.step#SGD.step"] == str(2 * RECORDED_STEPS)
    assert "Straggler: rank" in tab.straggler.text()
    assert tab.steps.proxy.rowCount() == len(torch.ops.steps) > 0


def test_sorting_by_a_column_orders_the_raw_values(qtbot, view, run_dir):
    tab = _load(qtbot, view, run_dir)
    col = [c.title for c in tab.ops.model.columns].index("CPU total")
    tab.ops.view.sortByColumn(col, Qt.SortOrder.DescendingOrder)
    values = tab.ops.column_values("CPU total", Qt.ItemDataRole.UserRole)
    assert values == sorted(values, reverse=True) and tab.ops.column_values("Name")[0] == "ProfilerStep*"


def test_a_row_highlights_its_events_and_shows_the_longest(qtbot, view, run_dir):
    tab = _load(qtbot, view, run_dir)
    torch, tl = view.report.torch, view.report.timeline
    tab.select_rank(1)
    _click(qtbot, tab.ops, "aten::addmm")
    table, idx = view.timeline.highlighted
    pid1 = torch.pid_of(1)
    assert table == "ranges" and len(idx) == next(r.count for r in torch.ops.ranks[1].ops if r.name == "aten::addmm")
    assert set(tl.ranges.pid[idx].tolist()) == {pid1} and (tl.ranges.source[idx] == T.SOURCE_TORCH).all()
    chosen = view.timeline.selected
    longest = idx[np.argmax(tl.ranges.end_ns[idx] - tl.ranges.start_ns[idx])]
    assert chosen["name"] == "aten::addmm" and chosen["index"] == longest and chosen["kind"] == "torch"
    t0, t1 = view.timeline.view_range()
    assert t0 <= tl.ranges.start_ns[longest] and tl.ranges.end_ns[longest] <= t1
    assert "±" in view.details.toPlainText()          # the details pane says how the clock was set
    tab.tabs.setCurrentWidget(tab.steps)
    index = tab.steps.proxy.index(0, 0)
    qtbot.mouseClick(tab.steps.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=tab.steps.view.visualRect(index).center())
    table, idx = view.timeline.highlighted
    step = tab.steps.model.rows[tab.steps.proxy.mapToSource(index).row()].step
    assert {tl.strings.values[i] for i in tl.ranges.name_id[idx].tolist()} == {f"ProfilerStep#{step}"}
    assert len(set(tl.ranges.pid[idx].tolist())) == 2


def test_grouping_by_shapes_splits_a_row_and_its_highlight(qtbot, view, run_dir):
    tab = _load(qtbot, view, run_dir)
    tab.select_rank(0)
    assert tab.shapes_box.isVisibleTo(tab) and "Input Shapes" not in [c.title for c in tab.ops.model.columns]
    tab.shapes_box.setChecked(True)
    qtbot.waitUntil(lambda: tab.by_shapes and tab.shapes_box.isEnabled(), timeout=LOAD_MS)
    titles = [c.title for c in tab.ops.model.columns]
    assert titles[:2] == ["Name", "Input Shapes"]
    rows = [(i, r) for i, r in enumerate(tab.ops.model.rows) if r.name == "aten::addmm"]
    assert len(rows) >= 2
    i, row = rows[0]
    index = tab.ops.proxy.mapFromSource(tab.ops.model.index(i, 0))
    tab.ops.view.scrollTo(index)
    qtbot.mouseClick(tab.ops.view.viewport(), Qt.MouseButton.LeftButton, pos=tab.ops.view.visualRect(index).center())
    assert len(view.timeline.highlighted[1]) == row.count


def test_an_op_clicked_on_the_timeline_is_its_rows_current_row(qtbot, view, run_dir):
    tab = _load(qtbot, view, run_dir)
    torch, tl = view.report.torch, view.report.timeline
    tab.select_rank(0)
    view.timeline.highlight(*_events(torch, "aten::mm", 1))      # zooms to rank 1's longest aten::mm
    longest = view.timeline.selected["index"]
    view.timeline.clear_highlight()
    tab.ops.view.setCurrentIndex(tab.ops.proxy.index(0, 0))
    pt = view.timeline.position_of("torch", longest)
    assert pt is not None
    qtbot.mouseClick(view.timeline, Qt.MouseButton.LeftButton, pos=pt.toPoint())
    assert view.timeline.selected["name"] == "aten::mm" and view.timeline.selected["pid"] == torch.pid_of(1)
    current = tab.ops.model.rows[tab.ops.proxy.mapToSource(tab.ops.view.currentIndex()).row()]
    assert current.name == "aten::mm" and tab.rank == 1          # the event's rank, its row
    assert int(tl.ranges.pid[longest]) == torch.pid_of(1)


def _events(torch, name: str, rank: int):
    from gpuscope.views.torch_ops import events_of

    return events_of(torch, name, rank)


def test_a_report_read_progressively_gets_the_tab_with_its_timeline(qtbot, view, run_dir):
    """Summaries first (no traces read yet), then the timeline and, with it, the Torch ops tab."""
    from gpuscope.nsys.report import load_events
    from gpuscope.views.torch_ops import attach

    rep = load_events(run_dir)
    tl, rep.loaded = rep.loaded, None
    summary_seen = threading.Event()   # the timeline's read waits for the summary, as a slow read would
    rep.loader = lambda: (summary_seen.wait(60), tl)[1]
    attach(rep, run_dir)
    at_summary: list[object] = []

    def on_summary(_r: object) -> None:
        at_summary.append(view.torch_ops)
        summary_seen.set()

    view.sigSummary.connect(on_summary)
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS):
        view.show_report(rep)
    assert at_summary == [None]
    assert view.torch_ops is not None and view.torch_ops.torch is rep.torch
    assert "Torch ops (2 ranks)" in [view.summary.tabText(i) for i in range(view.summary.count())]


def test_a_run_without_traces_has_no_torch_tab(qtbot, view, run_dir, tmp_path):
    """... and the previous report's tab goes (with the traces it holds)."""
    old = _load(qtbot, view, run_dir)
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("torch", "summary.json"))
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS):
        view.show_run(copy)
    assert view.torch_ops is None
    assert not any(view.summary.tabText(i).startswith("Torch ops") for i in range(view.summary.count()))
    qtbot.waitUntil(lambda: not shiboken6.isValid(old), timeout=5_000)


def test_formats_are_torchs():
    assert (torch_time(12.3456), torch_time(1234.5), torch_time(2_000_000)) == ("12.346us", "1.234ms", "2.000s")
    assert (torch_memory(4096), torch_memory(-3 << 19), torch_memory(12)) == ("4.00 Kb", "-1.50 Mb", "12 b")

