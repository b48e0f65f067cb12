"""scripts/gpu_smoke.py without a GPU: its help, its jobs' process logic (with a clearly named torch
TEST DOUBLE), and its sharing checks on SYNTHETIC exports shaped like the recordings it expects."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.findings import gpu_rules
from gpuscope.nsys.report import load_report
from tests.gpu import synthetic_export as sx

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_smoke.py"
FAKE_TORCH = Path(__file__).resolve().parent / "fake_torch"
MS = 1_000_000


@pytest.fixture
def smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_smoke"] = mod      # dataclasses look their module up
    spec.loader.exec_module(mod)
    mod.results.clear()
    return mod


def test_help_describes_the_sharing_experiment():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for words in ("The sharing experiment", "2 and 4 processes", "fork and by spawn", "shared multiprocessing queue",
                  "MPS off", "--sharing-only", "gpu-time-sliced"):
        assert words in out.stdout


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("mode", ["own", "queue"])
def test_share_job_runs_its_processes_test_double(smoke, tmp_path, method, mode):
    job = tmp_path / "share.py"
    job.write_text(smoke.SHARE_JOB)
    env = {**os.environ, "PYTHONPATH": str(FAKE_TORCH)}
    out = subprocess.run([sys.executable, str(job), method, "3", "4", "1000000", mode], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    pids = json.loads(out.stdout.split("workers ", 1)[1])
    assert len(set(pids)) == 3 and os.getpid() not in pids


def test_one_job_and_calibration_test_double(smoke, tmp_path, monkeypatch):
    env = {**os.environ, "PYTHONPATH": str(FAKE_TORCH)}
    job = tmp_path / "one.py"
    job.write_text(smoke.ONE_JOB)
    out = subprocess.run([sys.executable, str(job), "3", "1000"], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0 and out.stdout.startswith("workers [")
    monkeypatch.setenv("PYTHONPATH", str(FAKE_TORCH))
    assert smoke.calibrate(sys.executable) == pytest.approx(1e6, rel=0.5)   # the double: 1e9 cycles per s


def _recording(tmp_path, pids, overlap: bool):
    """What a 2-process own-mode recording should look like: 4 kernels of 5 ms each per process,
    taken in turns (or, ``overlap``, at once), each launched at 0."""
    ks = []
    t = 0
    for _ in range(4):
        for p in pids:
            ks.append(sx.Kernel(p, 0, t, t + 5 * MS, 0, name="spin_kernel"))
            t += 5 * MS + (0 if overlap else 20_000)
    if overlap:
        ks = [sx.Kernel(k.pid, 0, k.start - (5 * MS if k.pid == pids[1] else 0),
                        k.end - (5 * MS if k.pid == pids[1] else 0), 0, name="spin_kernel") for k in ks]
    return load_report(sx.write(tmp_path / f"rec{overlap}.sqlite", sx.Export(kernels=ks), "2024.2"),
                       use_cache=False)


def test_sharing_checks_pass_on_a_time_sliced_recording(smoke, tmp_path):
    case = smoke.Case(2, "spawn", "own")
    report = _recording(tmp_path, [11, 12], overlap=False)
    found = gpu_rules.time_sliced_findings(report.timeline, {})
    figures = smoke.sharing_checks(case, report, [11, 12], 4, 5.0, found)
    failed = [r for r in smoke.results if not r[1]]
    assert not failed, failed
    assert len(smoke.results) == 9 and figures["gpu_sharing"]["switches"] == 7


def test_sharing_checks_fail_when_the_processes_ran_at_once(smoke, tmp_path):
    case = smoke.Case(2, "fork", "own")
    report = _recording(tmp_path, [11, 12], overlap=True)
    smoke.sharing_checks(case, report, [11, 12], 4, 5.0, gpu_rules.time_sliced_findings(report.timeline, {}))
    failed = {r[0] for r in smoke.results if not r[1]}
    assert "2 x fork own: without MPS the processes never ran at once" in failed
    assert "2 x fork own: gpu-time-sliced found" in failed


def test_a_hung_case_is_stopped_with_its_process_tree(smoke, tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import os, time\nprint('hang pid', os.getpid(), flush=True)\ntime.sleep(120)\n")
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home")}
    out, err = smoke.gpuscope_run([sys.executable, "-m", "gpuscope", "run", str(script)], env, 4)
    assert "gpu_smoke: stopped after 4 s" in err
    pid = int(out.split("hang pid", 1)[1].split()[0])
    from gpuscope.procs.read import alive

    assert not alive(pid)


def test_sharing_checks_of_the_one_process_reference(smoke, tmp_path):
    ks = [sx.Kernel(21, 0, i * 5 * MS, (i + 1) * 5 * MS, 0, name="spin_kernel") for i in range(8)]
    report = load_report(sx.write(tmp_path / "one.sqlite", sx.Export(kernels=ks), "2023.4"), use_cache=False)
    smoke.sharing_checks(smoke.Case(2, "-", "one"), report, [21], 4, 5.0,
                         gpu_rules.time_sliced_findings(report.timeline, {}))
    assert [(name, ok) for name, ok, _ in smoke.results if not ok] == []
    assert "one process: no switch, nothing concurrent" in {name for name, _, _ in smoke.results}
    assert len(smoke.results) == 6
