"""Real Ray (CPU, a local cluster) under `gpuscope run` (issue 13): the program's output is the
same as without gpuscope, every Ray process has its role and one row, each task and actor method
call is one range named after its function, and no Ray process outlives the run."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gpuscope.trace.events import read_run_events
from tests import requires
from tests.runs.helpers import gpuscope, pid_alive, script, summary

requires.ray()
pytestmark = pytest.mark.ray


def _run(run_env, *args):
    proc = gpuscope("run", "--json", script("ray_app.py"), *args, env=run_env, timeout=280)
    result = summary(proc)
    assert result["exit_code"] == 0, proc.stderr.decode()[-3000:]
    return proc, result


def _no_process_left(result):
    pids = [p["pid"] for p in result["processes"]]
    assert result["left_running"] == [] and result["escaped"] == [], result
    assert not [pid for pid in pids if pid_alive(pid)], [p for p in result["processes"] if pid_alive(p["pid"])]


def _one_row_per_pid(result):
    pids = [p["pid"] for p in result["processes"]]
    assert len(pids) == len(set(pids)), sorted(pids)


def test_ray_program_runs_unchanged_with_roles_and_task_ranges(run_env):
    plain = subprocess.run([sys.executable, script("ray_app.py")], capture_output=True, env=run_env, timeout=240)
    assert plain.returncode == 0, plain.stderr.decode()[-3000:]
    proc, result = _run(run_env)
    assert proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[0] + b"\n" == plain.stdout
    assert plain.stdout.startswith(b"incr [1, 102, 4]\n")
    _one_row_per_pid(result)
    rows = result["processes"]
    roles = Counter(p["role"] for p in rows)
    assert roles["main"] == 1 and roles["ray GCS"] == 1 and roles["ray raylet"] == 1, roles
    assert roles["ray actor"] == 2 and roles["ray task worker"] >= 1, roles
    main = next(p for p in rows if p["role"] == "main")
    assert main["info"]["ray"] == "driver" and main["info"]["ray_address"] == "local"
    assert sorted(p["info"]["ray_actor"] for p in rows if p["role"] == "ray actor") == ["Counter", "Counter"]
    assert {p["info"]["ray_task"] for p in rows if p["role"] == "ray task worker"} <= {"square", "uses_helper"}
    # a Ray process that Python started through a fork and an exec has one row, with the later role
    assert [p for p in rows if p["info"].get("before_exec") == "fork child"], roles
    # one range per task / actor method call, named after the function (as pool tasks), beside
    # the program's own NVTX ranges; counted exactly from the event logs
    counts: Counter[str] = Counter()
    for pe in read_run_events(Path(result["run_dir"])):
        for nid in pe.ranges["nid"]:
            counts[pe.label(int(nid))] += 1
    expected = {"gpuscope:Counter.__init__": 2, "gpuscope:Counter.incr": 3, "incr": 3, "gpuscope:square": 5,
                "square body": 5, "gpuscope:uses_helper": 2, "helper": 2}
    assert {k: counts[k] for k in expected} == expected, counts
    assert not [f for f in result["findings"] if f["code"].startswith("ray-")], result["findings"]
    _no_process_left(result)


def test_ray_cluster_ends_with_the_run_without_shutdown(run_env):
    """Ray's atexit handler stops the local cluster; gpuscope leaves nothing behind either way."""
    _, result = _run(run_env, "--no-shutdown")
    _one_row_per_pid(result)
    assert Counter(p["role"] for p in result["processes"])["ray actor"] == 2
    _no_process_left(result)


def _probes_running() -> list[int]:
    """gpuscope's object store probes still running on this machine (any run)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"ray_probe.py" in cmd and pid_alive(int(entry.name)):
                out.append(int(entry.name))
    return out


def test_object_store_spilling_and_growth_are_found(run_env):
    """The seed case: every object kept referenced until the store spills to disk."""
    plain = subprocess.run([sys.executable, script("ray_spill.py")], capture_output=True, env=run_env, timeout=240)
    assert plain.returncode == 0, plain.stderr.decode()[-3000:]
    proc = gpuscope("run", "--json", script("ray_spill.py"), env=run_env, timeout=280)
    result = summary(proc)
    assert result["exit_code"] == 0, proc.stderr.decode()[-3000:]
    assert proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[0] + b"\n" == plain.stdout
    codes = {f["code"]: f for f in result["findings"]}
    assert "ray-object-store-spilled" in codes and "ray-object-store-growing" in codes, (list(codes), result["notes"])
    spilled = codes["ray-object-store-spilled"]["evidence"]["numbers"]
    assert spilled["spilled MiB"] >= 20 and spilled["store MiB"] == 80, spilled
    assert any(n.startswith("Ray object store: peak") for n in result["notes"]), result["notes"]
    from gpuscope.telemetry.ray_store import read_ray_store

    samples = read_ray_store(result["run_dir"])
    assert len(samples) >= 4 and samples[-1]["capacity"] == 80 * 2**20
    assert [s["used"] + s["spilled_bytes"] for s in samples] == sorted(s["used"] + s["spilled_bytes"] for s in samples)
    _no_process_left(result)
    assert not _probes_running(), "gpuscope's object store probe outlived the run"


def test_a_run_without_ray_starts_no_probe(run_env):
    proc = gpuscope("run", "--json", script("fork_exec.py"), env=run_env, timeout=120)
    result = summary(proc)
    assert not (Path(result["run_dir"]) / "ray_store.jsonl").exists()
    assert not [n for n in result["notes"] if "Ray" in n]
