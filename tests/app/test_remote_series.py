"""The launch panel's Compare start methods on a "remote" host (a real agent over ``connect_local``
with its own gpuscope home): the series runs there, the Run tab follows it, the Compare tab shows
its comparison, and the runs and the series are in the remote's store, not this machine's."""

from __future__ import annotations

import pytest
from apphelpers import fill
from test_remote_window import connected, disconnect
from test_remote_window import remote_home as remote_home_fixture

from gpuscope.app.remote import core as handle
from gpuscope.views.series_index import load_series

pytestmark = [pytest.mark.gui, pytest.mark.timeout(240)]
remote_home = remote_home_fixture     # the "remote" machine's own gpuscope home (a fixture)


def test_compare_start_methods_on_a_remote_host(qtbot, remote_home, gpuscope_home):
    w = connected(qtbot, remote_home)
    fill(w, "pool_spawn.py", args="0.5", method="default")
    p = w.panel
    assert [m for m, b in p.compare_methods.items() if b.isChecked()] == ["fork", "spawn"]
    p.repeat.setValue(1)
    progress: list[tuple] = []
    started: list[tuple] = []
    w.compare.controller.sigProgress.connect(lambda *a: progress.append(a))
    w.compare.controller.sigRunStarted.connect(lambda *a: started.append(a))
    with qtbot.waitSignal(w.compare.sigShown, timeout=180_000) as shown:
        p.compare_button.click()
        assert w.compare.busy and not p.run_button.isEnabled()
    cmp = shown.args[0]
    assert w.last_error is None, w.last_error
    assert progress == [(1, 2, "fork", 1), (2, 2, "spawn", 1)]
    assert cmp.labels == ["fork", "spawn"] and not cmp.left_out
    assert cmp.runs == {"fork": [started[0][0]], "spawn": [started[1][0]]}
    assert all(run_dir.startswith(str(remote_home)) and pid > 0 for _, run_dir, pid in started)
    view = w.compare.view
    assert w.tabs.currentWidget() is view and view.comparison is cmp and view.verdict.text() == cmp.verdict
    assert view.ranges.figures()["work"]["spawn"]["count"] == 4
    # the Run tab followed the runs there: their samples and their output
    w.console.flush()
    assert "results" in w.console.plain_text() and w.model.batches > 0
    assert not w.compare.busy and p.run_button.isEnabled()
    # the runs and the series are the remote's: History there lists the series as one entry
    data = handle.core().history(10)
    assert {r.id for r in data.rows} == {started[0][0], started[1][0]}
    assert [s.runs for s in data.series] == [cmp.runs]
    assert load_series() == []
    disconnect(qtbot, w)


def test_stop_ends_a_remote_series(qtbot, remote_home, gpuscope_home):
    w = connected(qtbot, remote_home)
    fill(w, "pool_spawn.py", args="3", method="default")
    w.panel.repeat.setValue(3)
    started: list[str] = []
    w.compare.controller.sigRunStarted.connect(lambda rid, _d, _p: started.append(rid))
    ended: list[object] = []
    w.compare.controller.sigComparison.connect(ended.append)
    w.compare.controller.sigFailed.connect(ended.append)
    w.panel.compare_button.click()
    qtbot.waitUntil(lambda: len(started) == 2, timeout=120_000)      # the second run (spawn) runs there
    w.panel.stop_button.click()
    qtbot.waitUntil(lambda: not w.compare.busy, timeout=60_000)
    assert len(started) == 2 and ended and not isinstance(ended[0], str), ended
    cmp = ended[0]
    assert cmp.runs == {"fork": [started[0]], "spawn": [started[1]]}
    assert "stopped" in cmp.left_out[started[1]]
    assert w.panel.run_button.isEnabled() and not w.panel.stop_button.isEnabled()
    assert [s.runs for s in handle.core().history(10).series] == [cmp.runs]
    disconnect(qtbot, w)
