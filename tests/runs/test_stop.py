"""Stopping a run: nothing of it remains, even workers that ignore SIGTERM and SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gpuscope.procs import membership
from gpuscope.procs import read as procread
from gpuscope.runs.supervisor import STOP_GRACE_S, Run
from gpuscope.spec import RunSpec
from tests.runs.helpers import script


def _wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _tree(run):
    return membership.run_processes(run.pid, run.run_id)


def test_stop_kills_stubborn_pool():
    chunks = []
    run = Run(RunSpec(script=script("stubborn_pool.py"), start_method="spawn"),
              output=[lambda name, data: chunks.append(data)]).start()
    assert _wait_for(lambda: b"pool running" in b"".join(chunks))
    assert _wait_for(lambda: len(_tree(run)) >= 3)  # main, resource tracker, workers
    pids = list(_tree(run))
    t0 = time.monotonic()
    run.stop()
    result = run.wait()
    elapsed = time.monotonic() - t0
    # the workers ignore SIGINT and SIGTERM: only the escalation's SIGKILL ends them, after two grace
    # periods; a bound about ending at all, far above a loaded machine's delays
    assert elapsed < 2 * STOP_GRACE_S + 5 + 60, elapsed
    assert result.status == "stopped"
    assert not [p for p in pids if procread.alive(p)]
    assert not _tree(run)


def test_ctrl_c_in_cli_stops_everything(run_env):
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "run", "--json", "--start-method", "fork",
                             script("stubborn_pool.py")], env=run_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert b"pool running" in line
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err.decode()
    import json

    result = json.loads(out.decode().strip().rsplit("\n", 1)[-1])
    assert result["status"] == "stopped"
    for p in result["processes"]:
        assert not procread.alive(p["pid"]), p
    assert os.path.exists(result["run_dir"])


def test_processes_left_running_are_reported_not_killed(tmp_path):
    code = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
    )
    path = tmp_path / "escape.py"
    path.write_text(code)
    chunks = []
    run = Run(RunSpec(script=str(path)), output=[lambda n, d: chunks.append(d)]).start()
    result = run.wait()
    escapee = int(b"".join(chunks).split()[0])
    try:
        assert result.status == "exited"
        assert escapee in result.left_running
        assert escapee in result.escaped
        assert procread.alive(escapee)
    finally:
        os.kill(escapee, signal.SIGKILL)


def test_a_child_ending_soon_after_is_waited_for_and_what_it_started_is_found(tmp_path):
    """The end of a run watches the processes it saw (issue 14.4: a /proc stat each, not a scan of
    every process each 50 ms): one that ends 0.3 s after the program is not left running; the
    process it started just before it ended is found by the scan that follows, and reported.
    (Neither holds the program's output, so the run's end waits for no pipe.)"""
    pids = tmp_path / "pids"
    late = ("import subprocess, sys, time; time.sleep(0.3); "
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
            f"open({str(pids)!r}, 'a').write('%d\\n' % g.pid)")
    path = tmp_path / "late.py"
    path.write_text("import subprocess, sys\n"
                    f"p = subprocess.Popen([sys.executable, '-c', {late!r}], stdout=subprocess.DEVNULL, "
                    "stderr=subprocess.DEVNULL)\n"
                    f"open({str(pids)!r}, 'a').write('%d\\n' % p.pid)\n")
    result = Run(RunSpec(script=str(path))).start().wait()
    child, grandchild = (int(x) for x in pids.read_text().split())
    try:
        assert result.status == "exited"
        assert child not in result.left_running and not procread.alive(child)
        assert result.left_running == [grandchild] and procread.alive(grandchild)
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_run_of_a_killed_gpuscope_is_marked_abandoned(run_env, tmp_path):
    """gpuscope itself is SIGKILLed mid-run: history marks the run failed, cleanup lists its leftovers."""
    import json

    path = tmp_path / "sleepy.py"
    path.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    cli = subprocess.Popen([sys.executable, "-m", "gpuscope", "run", str(path)], env=run_env,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert cli.stdout is not None and cli.stdout.readline() == b"up\n"

    def listed():
        out = subprocess.run([sys.executable, "-m", "gpuscope", "history", "--json"], env=run_env,
                             capture_output=True, check=True).stdout
        return json.loads(out)

    # gpuscope writes the run's row just after the program started (the program does not wait
    # on the store): "mid-run" is once the row is there
    deadline = time.monotonic() + 60
    while not listed() and time.monotonic() < deadline:
        time.sleep(0.05)
    cli.kill()
    cli.wait()
    row = listed()[0]
    assert row["status"] == "error" and "gpuscope stopped before the run ended" in row["error"]
    listing = subprocess.run([sys.executable, "-m", "gpuscope", "cleanup", "--json", "--idle-window", "0"],
                             env=run_env, capture_output=True)
    sleeper = [s for s in json.loads(listing.stdout)["suspects"] if s["evidence"].get("run_id") == row["id"]]
    try:
        assert sleeper, listing.stdout[:2000]
    finally:
        for pid in procread.all_pids():
            if membership.has_run_tag(pid, row["id"]):
                os.kill(pid, signal.SIGKILL)
