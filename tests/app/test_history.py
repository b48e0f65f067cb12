"""History: past runs from the store; reopening one shows its plots, console and timeline again."""

from __future__ import annotations

import pytest
from apphelpers import fill, make_window

pytestmark = pytest.mark.gui


def test_history_lists_runs_and_reopens_one(qtbot):
    w = make_window(qtbot)
    fill(w, "pool_spawn.py", "0.5", "spawn")
    with qtbot.waitSignal(w.sigReportLoaded, timeout=60_000):
        w.panel.run_button.click()
    run_id = w.last_result.run_id
    live_rss_pids = {k[2] for k in w.live.plots["rss"].curves}
    with qtbot.waitSignal(w.history.sigLoaded, timeout=20_000):
        w.tabs.setCurrentWidget(w.history)
    assert w.history.table.rowCount() == 1
    assert w.history.table.item(0, 0).text() == run_id
    assert w.history.table.item(0, 6).text() == "exited" and w.history.table.item(0, 4).text() == "spawn"
    # reopen it in a fresh state: plots from the stored samples, console from the logs, the timeline
    w.live.reset()
    w.console.clear()
    w.last_report = None
    with qtbot.waitSignal(w.sigReportLoaded, timeout=30_000):
        w.history.open_row(0)
    qtbot.waitUntil(lambda: "past run" in w.live.title.text(), timeout=20_000)
    assert w.tabs.currentIndex() == 0
    assert {k[2] for k in w.live.plots["rss"].curves} == live_rss_pids
    assert w.live.window.currentData() is None          # the whole run
    assert "task 0 done" in w.console.plain_text() and "start method spawn" in w.console.plain_text()
    roles = sorted(r.role for r in w.model.procs.values() if r.role)
    assert roles.count("pool worker") == 2
    assert str(w.last_report.path) == w.history.rows[0].run_dir
    assert len(set(w.last_report.timeline.ranges.pid)) == 3


def test_history_error_is_a_message(qtbot, gpuscope_home):
    """A store that cannot be opened at all (a folder in its place: a damaged file is recovered,
    see tests/store/test_recovery.py) is one line in the window, never a traceback."""
    w = make_window(qtbot)
    (gpuscope_home / "gpuscope.sqlite").mkdir()
    with qtbot.waitSignal(w.sigErrorShown, timeout=20_000) as blocker:
        w.history.refresh()
    assert blocker.args[0].startswith("cannot read the run store") and "\n" not in blocker.args[0]
    assert w.history.status.text() == "could not read the run history"
