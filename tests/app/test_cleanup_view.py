"""QtCleanup on real leftovers: a setsid sleeper left by a real ``gpuscope run`` and a leaked
/dev/shm segment made here. Listed with evidence, read-only until checked, cleaned only after the
confirmation dialog (driven here), refusals shown as their one-line reasons."""

from __future__ import annotations

import os
import signal
import time
import uuid
from multiprocessing import resource_tracker, shared_memory

import pytest
from apphelpers import confirm_cleanup
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from gpuscope.app import workers
from gpuscope.app.cleanup.qt_cleanup import QtCleanup
from gpuscope.cleanup.shm import SHM_MIN_AGE_S
from tests.app.timeline_support import Subreaper, leave_sleeper, save_shot, state_of
from tests.cleanup.util import held_semaphore

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
    resource_tracker.unregister(shm._name, "shared_memory")
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
    v = QtCleanup(use_gpu=False, idle_window_s=0, shm_min_age_s=0, grace_s=2, observe_every_ms=0,
                  auto_refresh_ms=0)
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
    return confirm_cleanup(qtbot, view, accept, WAIT_MS)


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
    v = QtCleanup(use_gpu=False, idle_window_s=0, shm_min_age_s=0, observe_every_ms=20, auto_refresh_ms=0)
    qtbot.addWidget(v)
    v.show()
    _refresh(qtbot, v)                                 # the scanner exists: observations start
    qtbot.waitUntil(lambda: v._observer is not None, timeout=5000)
    with qtbot.waitSignal(v.sigRefreshed, timeout=WAIT_MS) as sig:
        v.refresh()                                    # not dropped, not concurrent
    assert sig.args[0].by_shm(leaked_shm) is not None
    v.close()
    assert workers.wait_all(30_000)


# --------------------------------------------------------------------------- automatic listing (16.8)

def _leak_segment() -> str:
    """A segment nobody maps, made without multiprocessing (no resource tracker knows it)."""
    name = PREFIX + uuid.uuid4().hex[:10]
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, 4096)
    finally:
        os.close(fd)
    return name


def test_shown_tab_finds_a_segment_leaked_after_it_was_opened_without_refresh(qtbot):
    """The user's case: a segment leaked seconds after the tab was opened. The tab lists again by
    itself while shown; the segment is held back (and the note says why) while younger than the
    threshold, and listed once it is older — no Refresh pressed."""
    min_age = 3.0
    v = QtCleanup(use_gpu=False, idle_window_s=0, shm_min_age_s=min_age, observe_every_ms=0,
                  auto_refresh_ms=200)
    qtbot.addWidget(v)
    v.resize(1300, 700)
    assert "younger than 3 s are not judged yet" in v.hint.text()
    assert "every 0.2 s while shown" in v.hint.text()
    seen: list = []
    v.sigRefreshed.connect(seen.append)
    v.show()
    qtbot.waitUntil(lambda: len(seen) >= 1, timeout=WAIT_MS)     # the first listing, by the timer
    name = _leak_segment()
    try:
        made = os.stat(f"/dev/shm/{name}").st_mtime
        qtbot.waitUntil(lambda: any(r.by_shm(name) for r in seen), timeout=WAIT_MS)
        after = [r for r in seen if r.scanned_at > made]
        # a listing that ended just after the segment was made may have read /dev/shm before it:
        # judge the young note on listings that ended at least 0.5 s after it
        young = [r for r in after if 0.5 <= r.scanned_at - made < min_age - 0.5]
        assert young, "no listing while the segment was young (the timer did not run)"
        for r in young:
            assert r.by_shm(name) is None
            assert any("not judged yet" in n for n in r.notes), r.notes
        listed = next(r for r in after if r.by_shm(name))
        assert listed.scanned_at - made >= min_age
        assert any(s.key == f"shm:{name}" for s in v.model.suspects)
        # the next automatic listing may be running (every 0.2 s here): Refresh comes back after it
        qtbot.waitUntil(v.refresh_button.isEnabled, timeout=WAIT_MS)
        # hidden: no more listings
        v.hide()
        qtbot.waitUntil(lambda: not v.busy, timeout=WAIT_MS)
        count = len(seen)
        qtbot.wait(800)
        assert len(seen) == count
    finally:
        os.unlink(f"/dev/shm/{name}")
    v.close()
    assert workers.wait_all(30_000)


def test_automatic_listing_keeps_the_check_marks_and_the_selected_row(qtbot, leaked_shm):
    v = QtCleanup(use_gpu=False, idle_window_s=0, shm_min_age_s=0, observe_every_ms=0, auto_refresh_ms=150)
    qtbot.addWidget(v)
    seen: list = []
    v.sigRefreshed.connect(seen.append)
    v.show()
    qtbot.waitUntil(lambda: any(r.by_shm(leaked_shm) for r in seen), timeout=WAIT_MS)
    key = f"shm:{leaked_shm}"
    assert v.set_checked(key)
    row = next(r for r, s in enumerate(v.model.suspects) if s.key == key)
    v.view.selectRow(v.proxy.mapFromSource(v.model.index(row, 0)).row())
    assert leaked_shm in v.details.toPlainText()
    n = len(seen)
    qtbot.waitUntil(lambda: len(seen) >= n + 2, timeout=WAIT_MS)
    assert key in v.model.checked
    # the button is off while a listing runs (every 0.15 s here, maybe at this instant): on after it
    qtbot.waitUntil(v.clean_button.isEnabled, timeout=WAIT_MS)
    assert v._current_key() == key and leaked_shm in v.details.toPlainText()
    # the confirmation pauses it: the listing the dialog was made from stays
    qtbot.mouseClick(v.clean_button, Qt.LeftButton)
    assert v.confirm_box is not None
    qtbot.waitUntil(lambda: not v.busy, timeout=WAIT_MS)
    n = len(seen)
    qtbot.wait(600)
    assert len(seen) == n
    v.confirm_box.reject()
    qtbot.waitUntil(lambda: len(seen) > n, timeout=WAIT_MS)
    v.close()
    assert workers.wait_all(30_000)


# --------------------------------------------------------------------------- the status line (16.8)

WAITS_FOR_GO = r"""
import os, sys, time
print("waiting", flush=True)
for _ in range(1200):
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
print("done", flush=True)
"""


@pytest.mark.timeout(240)
def test_status_line_of_a_run_that_left_a_process_is_updated_after_the_clean_up(qtbot, reaper, tmp_path):
    """A run ends leaving a process running ("1 process(es) still running (see Cleanup)"); after
    the Cleanup tab ends it, the status bar says so instead of the stale count."""
    from tests.app.apphelpers import make_window

    w = make_window(qtbot)
    script, go = tmp_path / "waits.py", tmp_path / "go"
    script.write_text(WAITS_FOR_GO, encoding="utf-8")
    w.panel.set_script(str(script))
    w.panel.args.setText(str(go))
    w.panel.method.setCurrentIndex(w.panel.method.findData("default"))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=WAIT_MS) as started:
        w.panel.run_button.click()
    run_id = started.args[0].run_id
    # a process of the run (its GPUSCOPE_RUN_ID) that outlives it, adopted by our subreaper
    sleeper = reaper.sleeper({"GPUSCOPE_RUN_ID": run_id}, "import time; time.sleep(600)")
    go.write_text("go")
    with qtbot.waitSignal(w.controller.sigEnded, timeout=WAIT_MS) as ended:
        pass
    assert ended.args[0].left_running == [sleeper]
    assert w.state_label.toolTip().endswith("1 process(es) still running (see Cleanup)")
    w.tabs.setCurrentWidget(w.cleanup)
    view = w.cleanup
    qtbot.waitUntil(lambda: view.result is not None and view.result.by_pid(sleeper) is not None
                    and not view.busy, timeout=WAIT_MS)
    assert view.result.by_pid(sleeper).codes == ["run-leftover"]
    assert w.state_label.toolTip().endswith("still running (see Cleanup)")   # nothing changed yet
    assert view.set_checked(f"pid:{sleeper}")
    _confirm(qtbot, view, accept=True)
    assert view.last_results[0].ok
    line = w.state_label.toolTip()
    assert line.startswith(f"run {run_id} exited") and "still running" not in line, line
    assert line.endswith("the process(es) it left running have ended"), line
    assert w.left_running is None
    assert f"younger than {SHM_MIN_AGE_S:g} s are not judged yet" in view.hint.text()   # the real threshold
    qtbot.waitUntil(lambda: not view.busy, timeout=WAIT_MS)
    save_shot(w, "cleanup-tab.png", tmp_path)
    w.close()
    assert workers.wait_all(30_000)


def test_a_leftover_semaphore_is_a_semaphore_row_and_is_unlinked_after_confirmation(qtbot, view):
    """A named semaphore left by a SIGKILLed process (CPython's _multiprocessing.SemLock, as a
    multiprocessing Lock makes it): its own Kind, its own plan line, removed like a segment."""
    with held_semaphore() as (filename, proc):
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        key = f"shm:{filename}"
        result = _refresh(qtbot, view)
        assert result.by_shm(filename).codes == ["leaked-semaphore"]
        row = next(r for r, s in enumerate(view.model.suspects) if s.key == key)
        assert view.model.index(row, 0).data(Qt.DisplayRole) == "semaphore"
        assert view.set_checked(key)
        box = _confirm(qtbot, view, accept=True)
        assert f"unlink the named semaphore /dev/shm/{filename}" in box.text_shown
        (res,) = view.last_results
        assert res.ok and res.result == "done", res
        assert not os.path.exists(f"/dev/shm/{filename}")
