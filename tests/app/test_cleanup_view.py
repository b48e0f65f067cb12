"""QtCleanup on real leftovers: a setsid sleeper left by a real ``gpuscope run`` and a leaked
/dev/shm segment made here. Listed with evidence, read-only until checked, cleaned only after the
confirmation dialog (driven here), refusals shown as their one-line reasons."""

from __future__ import annotations

import os
import time
import uuid
from multiprocessing import resource_tracker, shared_memory

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from gpuscope.app import workers
from gpuscope.app.qt_cleanup import QtCleanup
from tests.app.timeline_support import Subreaper, leave_sleeper, save_shot, state_of

pytestmark = pytest.mark.gui
PREFIX = "psm_gpuscopetest_"
# multiprocessing's resource tracker lives as long as pytest: start it now, before a test's
# GPUSCOPE_HOME is set, so it is not taken for a process the test left behind.
resource_tracker.ensure_running()
WAIT_MS = 60_000


@pytest.fixture
def leaked_shm():
    name = PREFIX + uuid.uuid4().hex[:10]
    shm = shared_memory.SharedMemory(name=name, create=True, size=1 << 20)
    shm.buf[: 1 << 20] = b"x" * (1 << 20)
    resource_tracker.unregister(shm._name, "shared_memory")  # noqa: SLF001 - the usual leak
    shm.close()
    yield name
    if os.path.exists(f"/dev/shm/{name}"):
        os.unlink(f"/dev/shm/{name}")


@pytest.fixture
def reaper():
    r = Subreaper()
    yield r
    r.close()        # SIGKILLs and reaps whatever the test left


@pytest.fixture
def view(qtbot):
    v = QtCleanup(use_gpu=False, idle_window_s=0, shm_min_age_s=0, grace_s=2, observe_every_ms=0)
    qtbot.addWidget(v)
    v.resize(1300, 700)
    v.show()
    yield v
    assert workers.wait_all(30_000)


def _refresh(qtbot, view):
    with qtbot.waitSignal(view.sigRefreshed, timeout=WAIT_MS) as sig:
        qtbot.mouseClick(view.refresh_button, Qt.LeftButton)
    return sig.args[0]


def _confirm(qtbot, view, accept: bool) -> QMessageBox:
    qtbot.mouseClick(view.clean_button, Qt.LeftButton)
    box = view.confirm_box
    assert box is not None and box.isVisible()
    wanted = QMessageBox.AcceptRole if accept else QMessageBox.RejectRole
    button = next(b for b in box.buttons() if box.buttonRole(b) == wanted)
    text = box.text() + "\n" + box.informativeText()
    if accept:
        with qtbot.waitSignal(view.sigCleaned, timeout=WAIT_MS):
            qtbot.mouseClick(button, Qt.LeftButton)
    else:
        qtbot.mouseClick(button, Qt.LeftButton)
    box.text_shown = text
    return box


@pytest.mark.timeout(180)
def test_lists_sleeper_of_a_run_and_leaked_segment_and_cleans_them_after_confirmation(
        qtbot, view, reaper, leaked_shm, tmp_path):
    sleeper = leave_sleeper(reaper, tmp_path)
    assert state_of(sleeper) == "S"
    result = _refresh(qtbot, view)
    keys = {s.key: s for s in result.suspects}
    s_proc, s_shm = keys[f"pid:{sleeper}"], keys[f"shm:{leaked_shm}"]
    assert s_proc.codes == ["run-leftover"] and s_proc.evidence["run_id"]
    assert s_shm.codes == ["leaked-shm"]
    assert not view.clean_button.isEnabled()          # read-only until something is checked
    rows = {s.key: r for r, s in enumerate(view.model.suspects)}
    assert view.model.index(rows[s_proc.key], 0).data(Qt.DisplayRole) == "process"
    assert f"pid {sleeper}" in view.model.index(rows[s_proc.key], 1).data(Qt.DisplayRole)
    assert view.model.index(rows[s_shm.key], 6).data(Qt.DisplayRole) == "1.0 MiB"
    assert view.set_checked(s_proc.key) and view.set_checked(s_shm.key)
    assert view.clean_button.isEnabled()
    view.view.selectRow(view.proxy.mapFromSource(view.model.index(rows[s_proc.key], 0)).row())
    assert "run-leftover" in view.details.toPlainText() and str(sleeper) in view.details.toPlainText()
    save_shot(view, "cleanup.png", tmp_path)

    # Cancel first: nothing changes.
    box = _confirm(qtbot, view, accept=False)
    assert f"terminate pid {sleeper}" in box.text_shown and f"unlink /dev/shm/{leaked_shm}" in box.text_shown
    assert "cancelled" in view.state.text()
    assert state_of(sleeper) == "S" and os.path.exists(f"/dev/shm/{leaked_shm}")

    box = _confirm(qtbot, view, accept=True)
    results = {r.target: r for r in view.last_results}
    assert results[f"pid {sleeper}"].ok and "SIGTERM" in results[f"pid {sleeper}"].message
    assert results[f"/dev/shm/{leaked_shm}"].ok and results[f"/dev/shm/{leaked_shm}"].freed["shm_bytes"] >= 1 << 20
    end = time.monotonic() + 10
    while state_of(sleeper) is not None and time.monotonic() < end:
        time.sleep(0.05)
    assert state_of(sleeper) is None and not os.path.exists(f"/dev/shm/{leaked_shm}")
    shown = view.results.toPlainText()
    assert f"terminated pid {sleeper}" in shown and "freed" in shown and "1.0 MiB" in shown
    # the view lists again by itself after cleaning
    qtbot.waitUntil(lambda: not view.busy and f"shm:{leaked_shm}" not in {s.key for s in view.model.suspects},
                    timeout=WAIT_MS)
    assert f"pid:{sleeper}" not in {s.key for s in view.model.suspects}
    save_shot(view, "cleanup-done.png", tmp_path)


def test_a_refusal_is_shown_as_its_one_line_reason(qtbot, view, leaked_shm):
    result = _refresh(qtbot, view)
    assert result.by_shm(leaked_shm) is not None
    assert view.set_checked(f"shm:{leaked_shm}")
    holder = shared_memory.SharedMemory(name=leaked_shm)   # now mapped: the action must refuse
    try:
        _confirm(qtbot, view, accept=True)
    finally:
        holder.close()
    (res,) = view.last_results
    assert res.result == "refused" and not res.ok and "is in use by pid" in res.message
    assert res.message in view.results.toPlainText() and "\n" not in res.message
    assert os.path.exists(f"/dev/shm/{leaked_shm}")


def test_rows_gpuscope_may_not_touch_cannot_be_checked(qtbot, view, reaper):
    from gpuscope.store.db import connect
    from tests.cleanup.util import make_finished_run

    conn = connect()
    run_id = make_finished_run(conn)
    conn.close()
    other = reaper.sleeper({"GPUSCOPE_RUN_ID": run_id},
                           "import os, time; os.setgid(65534); os.setuid(65534); time.sleep(600)")
    qtbot.waitUntil(lambda: os.stat(f"/proc/{other}").st_uid == 65534, timeout=10_000)
    result = _refresh(qtbot, view)
    s = result.by_pid(other)
    assert s is not None and s.codes == ["run-leftover"] and s.blocked, s
    row = next(r for r, x in enumerate(view.model.suspects) if x.key == s.key)
    assert not view.model.flags(view.model.index(row, 0)) & Qt.ItemIsUserCheckable
    assert view.model.index(row, 0).data(Qt.CheckStateRole) is None
    assert not view.set_checked(s.key) and not view.clean_button.isEnabled()
    assert view.model.index(row, 11).data(Qt.DisplayRole) == s.blocked      # the refusal, one line
    for r, x in enumerate(view.model.suspects):
        checkable = bool(view.model.flags(view.model.index(r, 0)) & Qt.ItemIsUserCheckable)
        assert checkable == (bool(x.actions) and x.identity is not None and not x.blocked)
    assert "GPU checks skipped" in view.notes.text()


def test_refresh_during_a_background_observation_runs_right_after_it(qtbot, leaked_shm):
    v = QtCleanup(use_gpu=False, idle_window_s=0, shm_min_age_s=0, observe_every_ms=20)
    qtbot.addWidget(v)
    v.show()
    _refresh(qtbot, v)                                 # the scanner exists: observations start
    qtbot.waitUntil(lambda: v._observer is not None, timeout=5000)
    with qtbot.waitSignal(v.sigRefreshed, timeout=WAIT_MS) as sig:
        v.refresh()                                    # not dropped, not concurrent
    assert sig.args[0].by_shm(leaked_shm) is not None
    v.close()
    assert workers.wait_all(30_000)
