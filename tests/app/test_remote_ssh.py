"""The window on a remote host over a real ssh: the test sshd on its own port, logging in as the
second local user with key authentication, the agent installed there from the checkout's wheel
(tests/remote/conftest.py). The window's default connector is used: the system's ssh."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from apphelpers import confirm_cleanup, make_window
from PySide6.QtCore import Qt

from gpuscope.app.remote import core as handle
from gpuscope.app.remote import presenter
from tests.remote.conftest import remote_host, sshd  # noqa: F401 - the real sshd's fixtures

pytestmark = [pytest.mark.gui, pytest.mark.timeout(300)]
SHOTS = os.environ.get("GPUSCOPE_REMOTE_SHOTS")

PRINTS_UID = """
import multiprocessing as mp, os, time
def spin(i):
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
    return os.getuid()
if __name__ == "__main__":
    print("uid", os.getuid(), flush=True)
    with mp.get_context("spawn").Pool(2) as pool:
        r = pool.map_async(spin, range(4), chunksize=1)
        for i in range(20):
            print(f"tick {i}", flush=True)
            time.sleep(0.1)
        print("workers' uids", sorted(set(r.get())), flush=True)
"""


@pytest.fixture
def window(qtbot, remote_host):  # noqa: F811
    """A window opened as ``gpuscope gui --host H`` does: connected at start, over ssh."""
    presenter.CONNECT_AT_START.append(remote_host)
    w = make_window(qtbot)
    yield w
    if handle.remote() is not None:
        with qtbot.waitSignal(w.remote.sigDisconnected, timeout=20_000):
            w.remote.leave()
    handle.use(None)


def test_gui_host_runs_a_script_as_the_remote_user(qtbot, window, sshd):  # noqa: F811
    w = window
    qtbot.waitUntil(lambda: handle.remote() is not None, timeout=60_000)
    assert w.remote.label.text() == f"host: {sshd.host}" and sshd.host in w.windowTitle()
    core = handle.remote()
    assert core.hello["uid"] == sshd.user.pw_uid
    qtbot.waitUntil(lambda: w.history.task is None and w.history.data is not None, timeout=60_000)
    assert sshd.user.pw_dir in w.history.footer.text() or core.hello["data_dir"] in w.history.footer.text()
    script = sshd.script("prints_uid.py", PRINTS_UID)
    w.panel.set_script(str(script))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=60_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    assert str(w.controller.run.run_dir).startswith(core.hello["data_dir"])   # the remote user's data folder
    qtbot.waitUntil(lambda: w.model.batches >= 3, timeout=30_000)
    qtbot.waitUntil(lambda: len(w.model.procs) >= 3 and "tick 12" in w.console.plain_text(), timeout=30_000)
    w.tick()
    if SHOTS:
        w.grab().save(str(Path(SHOTS) / "remote-ssh-live.png"))
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    assert w.last_result.status == "exited", w.last_result
    text = w.console.plain_text()
    assert f"uid {sshd.user.pw_uid}" in text and "tick 19" in text
    assert f"workers' uids [{sshd.user.pw_uid}]" in text
    w.tabs.setCurrentWidget(w.history)         # History lists it: the remote's store
    qtbot.waitUntil(lambda: w.history.task is None and any(r.id == w.last_result.run_id for r in w.history.rows),
                    timeout=60_000)
    qtbot.waitUntil(lambda: w.last_report is not None and bool(w.last_report.summaries is not None), timeout=60_000)


TICKS = """
import time
for i in range(60):
    print(f"tick {i}", flush=True)
    time.sleep(0.1)
raise SystemExit(3)
"""


def test_ssh_killed_mid_run_then_reconnect_shows_the_whole_run(qtbot, window, sshd):  # noqa: F811
    w = window
    qtbot.waitUntil(lambda: handle.remote() is not None, timeout=60_000)
    w.panel.set_script(str(sshd.script("ticks_exit3.py", TICKS)))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=60_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    run_id = w.controller.run.run_id
    qtbot.waitUntil(lambda: "tick 5" in w.console.plain_text(), timeout=30_000)
    with qtbot.waitSignal(w.remote.sigDropped, timeout=30_000):
        handle.remote().connection.proc.kill()          # the ssh client dies (lid closed, network gone)
    assert "\n" not in w.last_error and "(disconnected)" in w.windowTitle()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=20_000)
    with qtbot.waitSignal(w.remote.sigReattached, timeout=60_000) as got:
        w.remote.reconnect()
    assert got.args[0] == run_id
    qtbot.waitUntil(lambda: w.last_result is not None and w.last_result.run_id == run_id, timeout=60_000)
    assert w.last_result.exit.code == 3, w.last_result
    w.tick()
    shown = [line for line in w.console.plain_text().splitlines() if line.startswith("tick ")]
    assert shown == [f"tick {i}" for i in range(60)]     # the whole output, once


def test_a_run_that_ended_while_disconnected_is_filled_in_on_reconnect(qtbot, window, sshd):  # noqa: F811
    w = window
    qtbot.waitUntil(lambda: handle.remote() is not None, timeout=60_000)
    w.panel.set_script(str(sshd.script("ticks_short.py", TICKS.replace("range(60)", "range(25)"))))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=60_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    run_id = w.controller.run.run_id
    qtbot.waitUntil(lambda: "tick 3" in w.console.plain_text(), timeout=30_000)
    with qtbot.waitSignal(w.remote.sigDropped, timeout=30_000):
        handle.remote().connection.proc.kill()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=20_000)
    qtbot.wait(4000)                                   # the run ends there, unwatched
    with qtbot.waitSignal(w.remote.sigReattached, timeout=60_000):
        w.remote.reconnect()
    qtbot.waitUntil(lambda: w.last_result is not None and w.last_result.run_id == run_id, timeout=60_000)
    assert w.last_result.exit.code == 3
    w.tick()
    shown = [line for line in w.console.plain_text().splitlines() if line.startswith("tick ")]
    assert shown == [f"tick {i}" for i in range(25)]


LEAVES_ONE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print("left", child.pid, flush=True)
"""


def test_cleanup_of_the_remote_ends_the_remote_users_leftover(qtbot, window, sshd):  # noqa: F811
    w = window
    qtbot.waitUntil(lambda: handle.remote() is not None, timeout=60_000)
    w.panel.set_script(str(sshd.script("leaves_one.py", LEAVES_ONE)))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=60_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    line = next(ln for ln in w.console.plain_text().splitlines() if ln.startswith("left "))
    pid = int(line.split()[1])
    try:
        assert os.stat(f"/proc/{pid}").st_uid == sshd.user.pw_uid    # the remote user's process
        w.tabs.setCurrentWidget(w.cleanup)
        view = w.cleanup
        qtbot.waitUntil(lambda: view.result is not None and not view.busy and view.result.by_pid(pid) is not None,
                        timeout=60_000)
        suspect = view.result.by_pid(pid)
        assert suspect.run_id == w.last_result.run_id and suspect.evidence.user == sshd.user.pw_name, suspect
        view.view.selectRow(next(i for i, s in enumerate(view.model.suspects) if s.pid == pid))
        if SHOTS:
            w.grab().save(str(Path(SHOTS) / "remote-cleanup.png"))
        assert view.set_checked(f"pid:{pid}")
        confirm_cleanup(qtbot, view)
        assert view.last_results[0].ok, view.last_results
        qtbot.waitUntil(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), timeout=20_000)
        qtbot.waitUntil(lambda: not view.busy, timeout=60_000)
    finally:
        if os.path.exists(f"/proc/{pid}") and not _zombie(pid):
            os.kill(pid, 9)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False
