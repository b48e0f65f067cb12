"""The window driving a "remote" host: a real agent over a local pipe (``connect_local``, the same
code path as over ssh minus ssh) with its own gpuscope home, so what the window shows is the
agent's machine's, not this one's: connect, History, a run launched there (live batches, output,
Stop), its report's tables, Cleanup, and a dropped connection with Reconnect.

``GPUSCOPE_REMOTE_SHOTS=DIR`` also saves the docs' screenshots (docs/REMOTE.md) there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from apphelpers import confirm_cleanup, make_window, processes_with_env, script
from PySide6.QtCore import Qt

from gpuscope.app.remote import core as handle
from gpuscope.errors import UserError
from gpuscope.remote.connection import connect_local

pytestmark = [pytest.mark.gui, pytest.mark.timeout(180)]
SHOTS = os.environ.get("GPUSCOPE_REMOTE_SHOTS")
AGENTS: list = []        # every agent connection a test opened (closed at its end, even on failure)


@pytest.fixture
def remote_home(tmp_path):
    """The "remote" machine's gpuscope home; no process of it may outlive the test."""
    home = tmp_path / "remote-home"
    home.mkdir()
    yield home
    handle.use(None)
    while AGENTS:
        AGENTS.pop().close()
    marker = f"GPUSCOPE_HOME={home}".encode()
    deadline = time.monotonic() + 10
    while processes_with_env(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with_env(marker)
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"the remote left processes running: {left}"


def remote_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GPUSCOPE_HOME"] = str(home)
    env.pop("PYTHONPATH", None)
    return env


def connected(qtbot, home: Path, host: str = "gpu-box"):
    """A window connected to an agent whose gpuscope home is ``home``."""
    w = make_window(qtbot)
    agents = []

    def connector(text: str, progress) -> object:
        progress("checking gpuscope on the host", None)
        conn = connect_local(env=remote_env(home), host=text)
        agents.append(conn)
        AGENTS.append(conn)
        return conn

    w.remote.connector = connector
    with qtbot.waitSignal(w.remote.sigConnected, timeout=30_000):
        w.remote.connect_to(host)
    w.agents = agents
    return w


def shot(w, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        w.grab().save(str(Path(SHOTS) / name))


def cli_run(home: Path, *args: str) -> str:
    """``gpuscope run ARGS`` on the "remote" (its home); its stdout."""
    return subprocess.run([sys.executable, "-m", "gpuscope", "run", *args], env=remote_env(home), check=True,
                          capture_output=True, text=True, timeout=120).stdout


def disconnect(qtbot, w) -> None:
    with qtbot.waitSignal(w.remote.sigDisconnected, timeout=10_000):
        w.remote.leave()
    for conn in w.agents:
        conn.close()


def test_connect_names_the_host_and_lists_the_remote_history(qtbot, remote_home, gpuscope_home):
    cli_run(remote_home, script("quiet_sleep.py"), "0.1")     # a run on the "remote" only
    w = connected(qtbot, remote_home)
    assert handle.remote() is not None and handle.host() == "gpu-box"
    assert "gpu-box" in w.windowTitle() and w.remote.label.text() == "host: gpu-box"
    assert w.remote.disconnect_action.isEnabled() and not w.remote.reconnect_action.isEnabled()
    qtbot.waitUntil(lambda: w.history.data is not None and len(w.history.rows) == 1, timeout=20_000)
    row = w.history.rows[0]
    assert str(remote_home) in row.run_dir and row.script.endswith("quiet_sleep.py")
    assert str(remote_home) in w.history.footer.text()          # the remote's data folder
    disconnect(qtbot, w)
    assert handle.remote() is None and w.windowTitle() == "gpuscope" and not w.remote.label.isVisible()
    qtbot.waitUntil(lambda: w.history.task is None and w.history.rows == [], timeout=20_000)   # this machine: none


def test_a_failed_connection_is_one_line(qtbot, gpuscope_home):
    w = make_window(qtbot)

    def refuse(text: str, progress) -> object:
        raise UserError(f"{text}: Permission denied (publickey)")

    w.remote.connector = refuse
    with qtbot.waitSignal(w.sigErrorShown, timeout=10_000) as err:
        w.remote.connect_to("alice@box")
    assert err.args[0] == "alice@box: Permission denied (publickey)"
    assert handle.remote() is None and w.windowTitle() == "gpuscope"


def test_connect_dialog_keeps_recent_hosts(qtbot, remote_home, gpuscope_home):
    w = connected(qtbot, remote_home, host="lab@gpu-box:2222")
    w.remote.ask()
    dialog = w.remote.dialog
    assert dialog is not None and dialog.host.itemText(0) == "lab@gpu-box:2222"
    raw = w.settings.value("remote/recent")
    assert "lab@gpu-box:2222" in str(raw) and "pass" not in str(raw).lower()
    if SHOTS:
        from gpuscope import __version__   # the line bootstrap._handle shows while the wheel goes over

        dialog.progress(f"installing the agent on lab@gpu-box:2222 (gpuscope {__version__} not installed there): "
                        f"sending gpuscope-{__version__}-cp311-cp311-linux_x86_64.whl (807 KiB)", 0.02)
        dialog.bar.show()
        dialog.adjustSize()
        qtbot.waitExposed(dialog)
        qtbot.wait(100)
        dialog.grab().save(str(Path(SHOTS) / "remote-connect.png"))
    dialog.reject()
    disconnect(qtbot, w)


def start_remote(qtbot, w, name: str, args: str = "") -> None:
    panel = w.panel
    panel.set_script(script(name))
    panel.args.setText(args)
    panel.python.setText(sys.executable)      # the remote's interpreter (with nvtx)
    panel.method.setCurrentIndex(panel.method.findData("spawn"))
    with qtbot.waitSignal(w.controller.sigStarted, timeout=30_000):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)


def test_a_remote_run_streams_live_and_its_report_opens(qtbot, remote_home, gpuscope_home):
    w = connected(qtbot, remote_home)
    start_remote(qtbot, w, "pool_spawn.py", "3")
    run = w.controller.run
    assert str(run.run_dir).startswith(str(remote_home))       # the run folder is the remote's
    qtbot.waitUntil(lambda: w.model.batches >= 5, timeout=30_000)
    qtbot.waitUntil(lambda: len(w.model.procs) >= 3, timeout=30_000)   # the pool's processes, sampled there
    assert w.controller.run.pid in w.model.procs                      # the main process's pid, there
    assert type(w.session.roles).__name__ == "RemoteRoles"           # read there, not from this disk
    qtbot.waitUntil(lambda: sorted(r.role for r in w.model.procs.values() if r.role) ==
                    ["main", "pool worker", "pool worker", "resource tracker"], timeout=20_000)
    qtbot.waitUntil(lambda: "task 9 done" in w.console.plain_text(), timeout=30_000)
    w.tick()
    shot(w, "remote-live.png")
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    assert w.last_result.status == "exited" and "task 11 done" in w.console.plain_text()
    qtbot.waitUntil(lambda: w.last_report is not None and bool(w.last_report.summaries.get("nvtx")), timeout=60_000)
    counts = {r.name: r.count for r in w.last_report.summaries["nvtx"]}
    assert counts == {"setup": 1, "work": 24, "gpuscope:work": 24}   # 2 tasks per 0.25 s
    assert not list(Path(gpuscope_home).glob("runs/*"))          # nothing of it on this machine
    tl = w.last_report.timeline                                    # the whole-run view's rows, pulled
    assert len(tl.ranges) == 49 and {tl.strings.get(i) for i in set(tl.ranges.name_id.tolist())} == {"setup", "work"}
    assert "gpuscope" in set(tl.domain_names().values())         # the task ranges' domain, named
    assert w.state_label.text().startswith(f"run {w.last_result.run_id} exited")   # the run's line stays
    w.tabs.setCurrentWidget(w.report_view)
    qtbot.waitUntil(lambda: w.reports.idle and w.report_view.timeline.layout_model is not None, timeout=30_000)
    layout = w.report_view.timeline.layout_model
    drawn = {b.pid for b in layout.processes if any(len(r.ref) for lane in b.lanes for r in lane.rows)}
    assert len(drawn) == 3, drawn                                  # main and its two pool workers
    qtbot.wait(200)
    shot(w, "remote-report.png")
    disconnect(qtbot, w)


def test_stop_ends_the_remote_run(qtbot, remote_home, gpuscope_home):
    w = connected(qtbot, remote_home)
    start_remote(qtbot, w, "sleepy_pool.py")
    qtbot.waitUntil(lambda: "alive" in w.console.plain_text(), timeout=30_000)
    qtbot.mouseClick(w.panel.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    assert w.last_result.status == "stopped", w.last_result
    disconnect(qtbot, w)


def test_cleanup_lists_and_ends_a_leftover_of_a_remote_run(qtbot, remote_home, gpuscope_home):
    out = cli_run(remote_home, "--json", script("quiet_sleep.py"), "0.1")
    run_id = json.loads(out.splitlines()[-1])["run_id"]
    # a process of that finished run (its GPUSCOPE_RUN_ID) still alive: only the remote's store knows the run
    env = {**remote_env(remote_home), "GPUSCOPE_RUN_ID": run_id}
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    try:
        w = connected(qtbot, remote_home)
        w.tabs.setCurrentWidget(w.cleanup)
        view = w.cleanup
        qtbot.waitUntil(lambda: view.result is not None and not view.busy, timeout=60_000)
        assert type(view._scanner).__name__ == "RemoteScanner"
        suspect = view.result.by_pid(leftover.pid)
        assert suspect is not None and suspect.run_id == run_id, [s.title for s in view.result.suspects]
        assert type(view.result).from_dict(view.result.to_dict()).to_dict() == view.result.to_dict()   # whole trip
        view.view.selectRow(next(i for i, s in enumerate(view.model.suspects) if s.pid == leftover.pid))
        assert view.set_checked(f"pid:{leftover.pid}")
        confirm_cleanup(qtbot, view)
        assert view.last_results[0].ok, view.last_results
        assert leftover.wait(10) != 0          # ended by the remote's cleanup
        qtbot.waitUntil(lambda: not view.busy, timeout=60_000)
        disconnect(qtbot, w)
    finally:
        if leftover.poll() is None:
            leftover.kill()
        leftover.wait()


TICKS = """
import threading
import time
i = 0
while True:
    print(f"tick {i}", flush=True)
    i += 1
    time.sleep(0.05)
"""


def ticks(text: str) -> list[int]:
    return [int(line.split()[1]) for line in text.splitlines() if line.startswith("tick ")]


def test_dropped_connection_keeps_the_view_and_reconnect_reattaches(qtbot, remote_home, gpuscope_home, tmp_path):
    w = connected(qtbot, remote_home)
    (tmp_path / "ticks.py").write_text(TICKS)
    w.panel.set_script(str(tmp_path / "ticks.py"))
    w.panel.python.setText(sys.executable)
    with qtbot.waitSignal(w.controller.sigStarted, timeout=30_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(ticks(w.console.plain_text())) > 5, timeout=30_000)
    run_id = w.controller.run.run_id
    with qtbot.waitSignal(w.remote.sigDropped, timeout=20_000):
        w.agents[-1].proc.kill()                    # the link dies (as when ssh is killed)
    assert "lost" in w.last_error and "\n" not in w.last_error
    assert "(disconnected)" in w.windowTitle() and w.remote.reconnect_action.isEnabled()
    qtbot.waitUntil(lambda: not w.controller.busy, timeout=20_000)
    before = ticks(w.console.plain_text())
    assert before                                    # the window keeps what it showed
    time.sleep(1.0)                                  # the run goes on there, unwatched
    with qtbot.waitSignal(w.remote.sigReattached, timeout=30_000) as got:
        w.remote.reconnect()
    assert got.args[0] == run_id and w.controller.busy
    assert "(disconnected)" not in w.windowTitle()
    qtbot.waitUntil(lambda: len(ticks(w.console.plain_text())) > len(before) + 30, timeout=30_000)
    w.stop_run()
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    assert w.last_result.run_id == run_id and w.last_result.status == "stopped"
    w.tick()
    shown = ticks(w.console.plain_text())
    assert shown == list(range(len(shown))), shown   # what was missed filled in, nothing twice
    disconnect(qtbot, w)


def test_gui_with_a_bad_host_is_one_line(run_env):
    env = {**run_env, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-m", "gpuscope", "gui", "--host", "lab@@box"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "gpuscope: error: bad host 'lab@@box': the user name 'lab@' is not valid (use [USER@]HOST[:PORT])"]


def test_a_remote_past_run_opens_from_history(qtbot, remote_home, gpuscope_home):
    cli_run(remote_home, script("pool_spawn.py"), "0.5")
    w = connected(qtbot, remote_home)
    qtbot.waitUntil(lambda: w.history.task is None and len(w.history.rows) == 1, timeout=30_000)
    row = w.history.rows[0]
    with qtbot.waitSignal(w.session.sigPastShown, timeout=30_000):
        w.open_past_run(row)
    text = w.console.plain_text()
    assert "task 3 done" in text and "start method fork" in text     # its output, pulled from the remote
    assert w.state_label.text() == f"showing past run {row.id}"      # its stored samples came too
    assert sorted(r.role for r in w.model.procs.values()) == ["main", "pool worker", "pool worker"]   # a fork pool
    w.tick()
    data = [c.getData() for c in w.live.plots["rss"].curves.values()]
    assert len(data) == 3 and all(len(x) >= 2 and (y > 0).any() for x, y in data)   # the plots drawn again
    qtbot.waitUntil(lambda: w.last_report is not None and bool(w.last_report.summaries.get("nvtx")), timeout=30_000)
    assert {r.name: r.count for r in w.last_report.summaries["nvtx"]}["work"] == 4
    disconnect(qtbot, w)


def test_disconnect_leaves_the_run_going_and_connecting_again_follows_it(qtbot, remote_home, gpuscope_home,
                                                                         tmp_path):
    w = connected(qtbot, remote_home)
    (tmp_path / "ticks.py").write_text(TICKS)
    w.panel.set_script(str(tmp_path / "ticks.py"))
    w.panel.python.setText(sys.executable)
    with qtbot.waitSignal(w.controller.sigStarted, timeout=30_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    run_id = w.controller.run.run_id
    qtbot.waitUntil(lambda: len(ticks(w.console.plain_text())) > 5, timeout=30_000)
    with qtbot.waitSignal(w.sigErrorShown, timeout=20_000) as err:
        w.remote.leave()
    assert err.args[0] == f"run {run_id} goes on on gpu-box, not watched: connect again to follow it"
    assert handle.remote() is None and w.windowTitle() == "gpuscope"
    with qtbot.waitSignal(w.remote.sigReattached, timeout=30_000) as got:
        w.remote.connect_to("gpu-box", reattach=True)
    assert got.args[0] == run_id
    qtbot.waitUntil(lambda: len(ticks(w.console.plain_text())) > 40, timeout=30_000)
    w.stop_run()
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    assert w.last_result.run_id == run_id and w.last_result.status == "stopped"
    w.tick()
    shown = ticks(w.console.plain_text())
    assert shown == list(range(len(shown)))
    disconnect(qtbot, w)


def test_download_from_the_host_resumes_and_the_window_shows_it(qtbot, remote_home, gpuscope_home, tmp_path):
    data = os.urandom(10 << 20)
    src = remote_home / "report.nsys-rep"
    src.write_bytes(data)
    w = connected(qtbot, remote_home)
    core = handle.remote()
    dest = tmp_path / "here" / "report.nsys-rep"
    dest.parent.mkdir()
    stop = threading.Event()
    with pytest.raises(UserError, match="stopped at 4,194,304 of 10,485,760 bytes"):
        core.download(str(src), dest, lambda done, size: stop.set(), stop)    # cut off after one piece
    assert (tmp_path / "here" / "report.nsys-rep.part").stat().st_size == 4 << 20 and not dest.exists()
    seen: list[int] = []
    core.download(str(src), dest, lambda done, size: seen.append(done))
    assert seen == [8 << 20, 10 << 20] and dest.read_bytes() == data            # resumed, not started again
    again = tmp_path / "again.nsys-rep"
    assert w.remote.download_action.isEnabled()
    w.remote.download(str(src), str(again))                                   # File → Download from host…
    qtbot.waitUntil(lambda: again.exists() and w.state_label.text().startswith("downloaded"), timeout=30_000)
    assert again.read_bytes() == data and str(again) in w.state_label.toolTip()
    disconnect(qtbot, w)


def test_take_stacks_of_a_remote_run(qtbot, remote_home, gpuscope_home):
    w = connected(qtbot, remote_home)
    start_remote(qtbot, w, "sleepy_pool.py")
    qtbot.waitUntil(lambda: w.console.plain_text().count("alive") >= 8, timeout=30_000)   # workers in nap()
    w.findings.take_stacks()                           # Run → Take stacks, on the remote's processes
    qtbot.waitUntil(lambda: bool(w.stacks.groups), timeout=60_000)
    functions = {f.function for g in w.stacks.groups for f in g.thread.frames}
    assert "nap" in functions, functions              # the pool workers' own frames, dumped there
    w.stop_run()
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    disconnect(qtbot, w)


def test_compare_of_two_remote_runs(qtbot, remote_home, gpuscope_home):
    for method in ("fork", "spawn"):
        cli_run(remote_home, "--start-method", method, script("pool_spawn.py"), "0.5")
    w = connected(qtbot, remote_home)
    qtbot.waitUntil(lambda: w.history.task is None and len(w.history.rows) == 2, timeout=30_000)
    ids = [r.id for r in w.history.rows]
    with qtbot.waitSignal(w.compare.sigShown, timeout=90_000) as shown:
        w.compare.compare_ids(ids)                      # History → Compare, on the remote's runs
    cmp = shown.args[0]
    assert sorted(cmp.labels) == ["fork", "spawn"], cmp.labels
    assert w.last_error is None, w.last_error
    disconnect(qtbot, w)


TINY = """
import time
import nvtx
with nvtx.annotate("outer"):
    time.sleep(0.3)
    for i in range(20000):
        nvtx.push_range("tiny")
        nvtx.pop_range()
    time.sleep(0.3)
"""


def test_zooming_into_a_remote_timeline_pulls_its_finer_rows(qtbot, remote_home, gpuscope_home, tmp_path):
    from gpuscope import api

    (tmp_path / "tiny.py").write_text(TINY)
    run_dir = json.loads(cli_run(remote_home, "--json", str(tmp_path / "tiny.py")).splitlines()[-1])["run_dir"]
    w = connected(qtbot, remote_home)
    with qtbot.waitSignal(w.sigReportLoaded, timeout=60_000):
        w.load_report(run_dir)
    view = w.report_view.timeline
    tl = view.timeline
    tiny_id = tl.strings.lookup("tiny")
    assert int((tl.ranges.name_id == tiny_id).sum()) < 10       # too narrow for the whole-run view (a slow few aside)
    full = api.load_report(run_dir).timeline                    # what the host has (same disk here)
    ftiny = full.ranges.name_id == full.strings.lookup("tiny")
    first = int(np.median(full.ranges.start_ns[ftiny]))
    zoom = w.remote.zoom
    held = f"{len(full.ranges):,} ranges, 0 kernels"             # the whole report's, as a local title says
    assert held in w.report_view.title.text() and len(tl.ranges) < len(full.ranges)
    view.set_view(first, first + 200_000)                        # 0.2 ms in the middle of the loop
    qtbot.waitUntil(lambda: zoom.pages >= 1 and zoom.task is None, timeout=30_000)
    assert held in w.report_view.title.text()                    # the same after a page came
    got = view.timeline
    a, b, min_ns = zoom.pulled[-1]
    in_page = ftiny & (full.ranges.end_ns >= a) & (full.ranges.start_ns < b) & \
        (full.ranges.end_ns - full.ranges.start_ns >= min_ns)
    had = set(tl.ranges.start_ns[tl.ranges.name_id == tiny_id].tolist())
    expect = set(full.ranges.start_ns[in_page].tolist()) | had
    assert set(got.ranges.start_ns[got.ranges.name_id == got.strings.lookup("tiny")].tolist()) == expect
    assert int(in_page.sum()) > 20                                # the page brought the loop's rows
    assert view.view_range()[0] == pytest.approx(first, abs=100)   # the view stayed where it was
    w.tabs.setCurrentWidget(w.report_view)
    view.set_view(first, first + 200_000)
    qtbot.wait(100)
    shot(w, "remote-report-zoomed.png")
    assert len(got.ranges) == len(set(zip(got.ranges.start_ns.tolist(), got.ranges.pid.tolist(),
                                          got.ranges.name_id.tolist())))     # each row once
    disconnect(qtbot, w)
