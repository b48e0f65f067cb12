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
    # Samples sit on a 100 ms grid; a grid point the machine did not run in time is counted in
    # `missed`, never made up with a burst. Where no point was missed, the count is the cadence.
    grid = len(ticks) + sum(t["missed"] for t in ticks)
    assert len(ticks) >= 2 and grid <= 22, (len(ticks), grid)
    gaps = [b["t_ns"] - a["t_ns"] for a, b in zip(ticks, ticks[1:])]
    # no catch-up burst after a late tick: never more ticks than grid points in their span (a count,
    # whatever the load; a late tick may lie close to the next one)
    assert min(gaps) > 0 and len(ticks) <= (ticks[-1]["t_ns"] - ticks[0]["t_ns"]) / 100e6 + 2, gaps
    if grid == len(ticks):
        assert 17 <= len(ticks), len(ticks)
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
    procs = [line.split() for line in p.stdout.splitlines()
             if line.split()[1:2] == ["proc"] and not line.startswith("#")]
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
    listed = [t for t in ticks if t["processes"]]
    assert len(listed) >= 5, "no tick listed the followed process"
    assert all([p["pid"] for p in t["processes"]] == [child.pid] for t in listed)
    assert ticks == sorted(ticks, key=lambda t: t["t_ns"])
    # a finished run replays and exits
    again = monitor(run_env, "--run", "r-live", "--json")
    assert again.returncode == 0 and len(again.stdout.splitlines()) == len(lines)


def test_gpu_lines_come_from_nvml(monkeypatch, capsys):
    """The GPU and per-process GPU lines of `gpuscope monitor --pid`, driven by the fake NVML
    (tests/fakes/fake_nvml.py: no GPU here) through the command's own code path."""
    import argparse

    from gpuscope.commands import monitor as cmd
    from gpuscope.telemetry import sampler as sampler_mod
    from gpuscope.telemetry.gpu import NvmlBackend
    from tests.fakes.fake_nvml import FakeGpu, FakeNvml

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        nv = FakeNvml([FakeGpu(processes={child.pid: 3 << 30}, sm_util={child.pid: 37}),
                       FakeGpu(name="Fake A100", uuid="GPU-fake-1", util_gpu=90, mem_used=5 << 30,
                               processes={4_000_000: 1 << 30})])      # not in the tree: not shown
        monkeypatch.setattr(sampler_mod, "open_backend", lambda: NvmlBackend(nv))
        parser = argparse.ArgumentParser()
        cmd.add_arguments(parser)
        assert cmd.run(parser.parse_args(["--pid", str(child.pid), "--interval", "0.1",
                                          "--duration", "1.5"])) == 0
    finally:
        child.kill()
        child.wait()
    out = capsys.readouterr().out.splitlines()
    gpu0 = [line.split() for line in out if line.split()[1:3] == ["gpu", "0"]]
    gpu1 = [line.split() for line in out if line.split()[1:3] == ["gpu", "1"]]
    assert gpu0 and gpu1 and len(gpu0) == len(gpu1)
    # sm%, mem%, fbMiB, totMiB, tempC, pwrW, sclkMHz
    assert gpu0[-1][3:] == ["40.0", "20.0", "2048", "81920", "55", "150", "1980"]
    assert gpu1[-1][3:6] == ["90.0", "20.0", "5120"]
    header = next(line for line in out if line.startswith("#time    proc")).split()
    procs = [line.split() for line in out if line.split()[1:3] == ["proc", str(child.pid)]]
    assert procs, out[:5]
    row = dict(zip(header[1:], procs[-1][1:]))
    assert row["fbMiB"] == "3072" and row["sm%"] == "37.0"
    assert not any(line.split()[1:3] == ["proc", "4000000"] for line in out)
