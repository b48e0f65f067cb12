"""`gpuscope monitor` as a user runs it (a real subprocess), without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from gpuscope.store import db, runs
from gpuscope.telemetry.gpu import NoGpuBackend
from gpuscope.telemetry.sampler import RunSampler


def monitor(run_env, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuscope", "monitor", *args], env=run_env,
                          capture_output=True, text=True, timeout=timeout)


def test_json_host_samples_at_the_cadence_and_one_no_gpu_note(run_env):
    p = monitor(run_env, "--json", "--duration", "2", "--interval", "0.1")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    notes = [x for x in lines if x["type"] == "note"]
    ticks = [x for x in lines if x["type"] == "sample"]
    assert len(notes) == 1 and notes[0]["note"].startswith("no NVIDIA GPU / driver")
    assert 17 <= len(ticks) <= 22, len(ticks)
    gaps = [b["t_ns"] - a["t_ns"] for a, b in zip(ticks, ticks[1:])]
    assert abs(sum(gaps) / len(gaps) - 100e6) < 10e6
    assert all(t["host"]["mem_total"] > 0 for t in ticks) and ticks[-1]["host"]["cpu"] is not None
    assert all(t["gpus"] == [] for t in ticks)


def test_text_mode_follows_a_pid_and_notes_on_stderr(run_env):
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                              "time.sleep(30)"])
    try:
        time.sleep(0.5)
        p = monitor(run_env, "--pid", str(child.pid), "--duration", "1.2", "--interval", "0.5")
    finally:
        child.kill()
        child.wait()
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("# note: no NVIDIA GPU / driver") == 1
    procs = [line.split() for line in p.stdout.splitlines() if line.split()[1:2] == ["proc"] and not line.startswith("#")]
    assert {int(x[2]) for x in procs} >= {child.pid} and len({x[2] for x in procs}) == 2
    assert any(line.split()[1] == "host" for line in p.stdout.splitlines())
    assert p.stdout.startswith("#time    proc")


@pytest.mark.parametrize("args, message", [
    (["--interval", "5"], "1-50 Hz"),
    (["--pid", str(2 ** 22 + 777)], "no process"),
    (["--run", "nope"], "no run 'nope'"),
])
def test_user_errors_are_one_line(run_env, args, message):
    p = monitor(run_env, *args)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr


def test_follows_a_running_runs_stored_samples(run_env, gpuscope_home):
    conn = db.connect()
    runs.insert_run(conn, run_id="r-live", spec={"script": "x.py", "launcher": "python", "start_method": "fork"},
                    run_dir=str(gpuscope_home), versions={})
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    s = RunSampler(child.pid, 0.1, gpu=NoGpuBackend("no NVIDIA GPU / driver (test)"), store=True,
                   run_id="r-live", flush_s=0.3)
    s.start()
    try:
        mon = subprocess.Popen([sys.executable, "-m", "gpuscope", "monitor", "--run", "r-li", "--json",
                                "--interval", "0.2", "--duration", "20"],
                               env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)
        s.stop()
        runs.finish_run(conn, "r-live", status="exited", ended_ns=time.time_ns(), exit_code=0, signal=None)
        out, err = mon.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert mon.returncode == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    ticks = [x for x in lines if x["type"] == "sample"]
    assert [x["note"] for x in lines if x["type"] == "note"] == ["no NVIDIA GPU / driver (test)"]
    assert len(ticks) >= 15
    assert all(t["processes"][0]["pid"] == child.pid for t in ticks if t["processes"])
    assert ticks == sorted(ticks, key=lambda t: t["t_ns"])
    # a finished run replays and exits
    again = monitor(run_env, "--run", "r-live", "--json")
    assert again.returncode == 0 and len(again.stdout.splitlines()) == len(lines)
