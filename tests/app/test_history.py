"""History: past runs from the store; reopening one shows its plots, console and timeline again."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from apphelpers import fill, make_window, script, wait_report
from PySide6.QtCore import Qt

from gpuscope.spec import NsysOptions, RunSpec
from tests.app.timeline_support import save_shot

pytestmark = pytest.mark.gui


def test_history_lists_runs_and_reopens_one(qtbot):
    w = make_window(qtbot)
    fill(w, "pool_spawn.py", "0.5", "spawn")
    with qtbot.waitSignal(w.sigReportLoaded, timeout=60_000):
        w.panel.run_button.click()
    run_id = w.last_result.run_id
    live_rss_pids = {k[2] for k in w.live.plots["rss"].curves}
    # main's setup range and the tasks' (a loaded machine may give every task to one of the 2 workers)
    ranges_by_pid = _ranges_by_pid(w.last_report)
    assert len(ranges_by_pid) >= 2 and sum(ranges_by_pid.values()) == 9, ranges_by_pid
    with qtbot.waitSignal(w.history.sigLoaded, timeout=20_000):
        w.tabs.setCurrentWidget(w.history)
    assert w.history.table.rowCount() == 1
    assert w.history.table.item(0, 0).text() == run_id
    assert w.history.table.item(0, _col("Status")).text() == "exited"
    assert w.history.table.item(0, _col("Start method")).text() == "spawn"
    # reopen it in a fresh state: plots from the stored samples, console from the logs, the timeline
    w.live.reset()
    w.console.clear()
    w.last_report = None
    with qtbot.waitSignal(w.sigReportLoaded, timeout=30_000):
        w.history.open_row(0)
    qtbot.waitUntil(lambda: "past run" in w.live.title.text(), timeout=20_000)
    assert w.tabs.currentIndex() == 0
    assert {k[2] for k in w.live.plots["rss"].curves} == live_rss_pids
    assert w.live.span_choice.currentData() is None          # the whole run
    assert "task 0 done" in w.console.plain_text() and "start method spawn" in w.console.plain_text()
    roles = sorted(r.role for r in w.model.procs.values() if r.role)
    assert roles.count("pool worker") == 2
    assert str(w.last_report.path) == w.history.rows[0].run_dir
    assert _ranges_by_pid(w.last_report) == ranges_by_pid     # the same timeline again


def _ranges_by_pid(report) -> dict[int, int]:
    pids = report.timeline.ranges.pid.tolist()
    return {pid: pids.count(pid) for pid in set(pids)}


def test_history_error_is_a_message(qtbot, gpuscope_home):
    """A store that cannot be opened at all (a folder in its place: a damaged file is recovered,
    see tests/store/test_recovery.py) is one line in the window, never a traceback."""
    w = make_window(qtbot)
    (gpuscope_home / "gpuscope.sqlite").mkdir()
    with qtbot.waitSignal(w.sigErrorShown, timeout=20_000) as blocker:
        w.history.refresh()
    assert blocker.args[0].startswith("cannot read the run store") and "\n" not in blocker.args[0]
    assert w.history.status.text() == "could not read the run history"


# --------------------------------------------------------------------------- History you can act on (16.6)

def _cli_run(run_env: dict, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--json", "--quiet", *args], env=run_env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])["run_id"]


def _load(qtbot, w) -> None:
    with qtbot.waitSignal(w.history.sigLoaded, timeout=30_000):
        w.tabs.setCurrentWidget(w.history)


def _row_of(history, run_id: str) -> int:
    return next(r for r in range(history.table.rowCount()) if history.table.item(r, 0).text() == run_id)


def _click_row(qtbot, history, row: int, ctrl: bool = False) -> None:
    rect = history.table.visualRect(history.table.model().index(row, 1))
    mod = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
    qtbot.mouseClick(history.table.viewport(), Qt.MouseButton.LeftButton, mod, rect.center())


def _menu_action(history, text: str):
    menu = history.context_menu()
    return next(a for a in menu.actions() if a.text() == text)


def _stored_spec(run_id: str) -> RunSpec:
    from gpuscope.store import db, runs

    conn = db.connect()
    try:
        return RunSpec.from_dict(runs.get_run(conn, run_id).spec)
    finally:
        conn.close()


def _col(name: str) -> int:
    from gpuscope.app.history.qt_history import COLUMNS

    return COLUMNS.index(name)


@pytest.mark.timeout(240)
def test_arguments_column_multi_select_and_run_again_fills_the_panel(qtbot, run_env, tmp_path):
    """Two runs of one script with different arguments: the Arguments column tells them apart;
    Ctrl+click selects both (Compare and Delete act on them); "Run again with these settings" fills
    the launch panel with exactly the chosen run's RunSpec and shows the Run tab."""
    small = _cli_run(run_env, "--start-method", "spawn", script("pool_spawn.py"), "0.3")
    large = _cli_run(run_env, "--start-method", "forkserver", script("pool_spawn.py"), "0.5", "--tag", "two words")
    w = make_window(qtbot)
    fill(w, "demo_pool.py", "--other", "fork")                # the panel holds other settings
    _load(qtbot, w)
    h = w.history
    assert h.table.rowCount() == 2
    rows = {run_id: _row_of(h, run_id) for run_id in (small, large)}
    assert h.table.item(rows[small], _col("Script")).text() == h.table.item(rows[large], _col("Script")).text()
    assert h.table.item(rows[small], _col("Arguments")).text() == "0.3"
    assert h.table.item(rows[large], _col("Arguments")).text() == "0.5 --tag 'two words'"
    # multi-select: both rows, by Ctrl+click
    _click_row(qtbot, h, rows[small])
    _click_row(qtbot, h, rows[large], ctrl=True)
    assert sorted(r.id for r in h.selected_rows()) == sorted([small, large])
    assert h.selection.text() == "2 of 2 selected"
    assert h.compare_button.isEnabled() and h.delete_button.isEnabled() and h.delete_button.text() == "Delete 2…"
    assert not h.rerun_button.isEnabled() and not h.open_button.isEnabled()
    assert _menu_action(h, "Compare 2 runs").isEnabled() and _menu_action(h, "Delete 2 run(s)…").isEnabled()
    assert not _menu_action(h, "Run again with these settings").isEnabled()
    save_shot(h, "history-actions.png", tmp_path)
    # one row: run it again from the context menu
    _click_row(qtbot, h, rows[large])
    assert [r.id for r in h.selected_rows()] == [large]
    with qtbot.waitSignal(h.sigRerun, timeout=5000):
        _menu_action(h, "Run again with these settings").trigger()
    assert w.tabs.currentIndex() == 0
    assert w.panel.spec() == _stored_spec(large)
    assert w.panel.args.text() == "0.5 --tag 'two words'" and w.panel.method.currentData() == "forkserver"
    assert w.state_label.toolTip().startswith("launch panel: the settings of pool_spawn.py 0.5 --tag 'two words'")
    # and the other one, from the button
    _load(qtbot, w)
    _click_row(qtbot, h, _row_of(h, small))
    h.rerun_button.click()
    assert w.panel.spec() == _stored_spec(small) and w.panel.args.text() == "0.3"


@pytest.mark.timeout(240)
def test_an_opened_past_run_says_the_panel_is_the_next_runs_and_loads_its_settings(qtbot, run_env, tmp_path):
    past = _cli_run(run_env, "--start-method", "spawn", script("pool_spawn.py"), "0.4")
    w = make_window(qtbot)
    fill(w, "demo_pool.py", "--next", "fork")
    _load(qtbot, w)
    bar = w.history.past_bar
    assert not bar.isVisible()
    with qtbot.waitSignal(w.sigReportLoaded, timeout=60_000):
        w.history.open_row(0)
    qtbot.waitUntil(bar.isVisible, timeout=20_000)
    text = bar.label.text()
    assert past in text and "pool_spawn.py 0.4" in text and "<b>next</b> run" in text
    assert w.panel.args.text() == "--next"                     # opening changed nothing in the panel
    save_shot(w, "past-run-bar.png", tmp_path)
    bar.load_button.click()
    assert not bar.isVisible()
    assert w.panel.spec() == _stored_spec(past)
    # a new run hides it too (the plots are the panel's run again)
    w.history.showing_past(past)
    assert bar.isVisible()
    with qtbot.waitSignal(w.controller.sigEnded, timeout=120_000):
        w.panel.run_button.click()
    assert not bar.isVisible()
    wait_report(qtbot, w)


def test_run_again_carries_every_field_of_the_spec(qtbot, gpuscope_home, tmp_path):
    """A stored module run under torchrun with nsys, fork tracing off, two annotate patterns, its
    own working dir and interpreter: the panel gives back exactly that RunSpec. What the panel has
    no field for (nsys arguments, environment) is said, not silently dropped."""
    from gpuscope.store import db, runs

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("print('hi')\n")
    rich = RunSpec(script="", module="pkg.train", args=("--lr", "0.1", "a b"), cwd=str(tmp_path),
                   python=sys.executable, start_method="forkserver", launcher="torchrun", nproc=3,
                   annotate=("pkg.train:step", "pkg.train:Model.*"),
                   nsys=NsysOptions(enabled=True, trace=("nvtx", "cuda"), trace_fork=False)).validated()
    extra = RunSpec(script=script("pool_spawn.py"), args=("1",), start_method="fork",
                    nsys=NsysOptions(enabled=True, trace_fork=True, extra_args=("--sample=none",)),
                    env=(("SECRET_FLAG", "1"),)).validated()
    conn = db.connect()
    for run_id, spec in (("20261201-000001-aaaaaaaa", rich), ("20261201-000002-bbbbbbbb", extra)):
        runs.insert_run(conn, run_id=run_id, spec=spec.to_dict(), run_dir=str(tmp_path / run_id), versions={})
        runs.finish_run(conn, run_id, status="exited", ended_ns=time.time_ns(), exit_code=0, signal=None)
    conn.close()
    w = make_window(qtbot)
    _load(qtbot, w)
    h = w.history
    assert h.table.item(_row_of(h, "20261201-000001-aaaaaaaa"), _col("Arguments")).text() == "--lr 0.1 'a b'"
    h.rerun_row(h.rows[_row_of(h, "20261201-000001-aaaaaaaa")])
    assert w.panel.is_module and w.panel.launcher.currentText() == "torchrun" and w.panel.nproc.value() == 3
    assert w.panel.spec() == rich
    assert "not carried" not in w.state_label.toolTip()
    h.rerun_row(h.rows[_row_of(h, "20261201-000002-bbbbbbbb")])
    assert not w.panel.is_module and w.panel.fork.currentData() == "on"
    assert w.panel.spec() == extra._replace(env=(), nsys=extra.nsys._replace(extra_args=()))
    said = w.state_label.toolTip()
    assert "not carried, the panel has no field for: nsys arguments --sample=none; environment SECRET_FLAG" in said


def test_delete_from_the_context_menu_removes_runs_from_store_and_disk(qtbot, gpuscope_home):
    from PySide6.QtWidgets import QMessageBox

    from gpuscope import paths
    from gpuscope.store import db, runs

    ids = ["20261201-000003-cccccccc", "20261201-000004-dddddddd", "20261201-000005-eeeeeeee"]
    conn = db.connect()
    for run_id in ids:
        folder = paths.runs_dir() / run_id
        (folder / "events").mkdir(parents=True)
        (folder / "stdout.log").write_bytes(b"x" * 50_000)
        (folder / "events" / "1-2.log").write_text("e\n")
        runs.insert_run(conn, run_id=run_id, spec={"script": "t.py", "launcher": "python", "start_method": "spawn",
                                                   "args": [run_id]}, run_dir=str(folder), versions={})
        runs.finish_run(conn, run_id, status="exited", ended_ns=time.time_ns(), exit_code=0, signal=None)
    conn.close()
    w = make_window(qtbot)
    _load(qtbot, w)
    h = w.history
    doomed = ids[:2]
    _click_row(qtbot, h, _row_of(h, doomed[0]))
    _click_row(qtbot, h, _row_of(h, doomed[1]), ctrl=True)
    # the Delete key (in the table) asks too; cancel it
    h.table.setFocus()
    qtbot.waitUntil(h.table.hasFocus, timeout=5000)
    qtbot.keyClick(h.table, Qt.Key.Key_Delete)
    box = h.confirm_box
    assert box is not None and box.text().startswith("Delete 2 run(s)")
    assert all(i in box.informativeText() for i in doomed) and ids[2] not in box.informativeText()
    next(b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.RejectRole).click()
    assert all((paths.runs_dir() / i).is_dir() for i in ids)
    _menu_action(h, "Delete 2 run(s)…").trigger()
    box = h.confirm_box
    with qtbot.waitSignal(h.sigLoaded, timeout=60_000):
        next(b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole).click()
    assert [h.table.item(r, 0).text() for r in range(h.table.rowCount())] == [ids[2]]
    assert h.status.text().startswith("deleted 2 run(s)")
    assert not any((paths.runs_dir() / i).exists() for i in doomed) and (paths.runs_dir() / ids[2]).is_dir()
    conn = db.connect()
    try:
        assert [r.id for r in runs.list_runs(conn)] == [ids[2]]
    finally:
        conn.close()
