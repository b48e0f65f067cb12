"""`gpuscope compare RUN_A RUN_B`: recorded runs side by side (fork vs spawn), and bad input."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.runs.helpers import gpuscope, script, summary


def _last_json(proc):
    return json.loads(proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1])


def _median(values):
    return statistics.median(values) if values else None


def test_compare_recorded_fork_and_spawn(run_env):
    ids, runs = {}, {}
    for method in ("fork", "spawn"):
        proc = gpuscope("run", "--json", "--quiet", "--start-method", method, script("pool_nvtx.py"), env=run_env)
        runs[method] = summary(proc)
        ids[method] = runs[method]["run_id"]
    out = gpuscope("compare", ids["fork"], ids["spawn"], "--json", env=run_env)   # --json after the ids
    assert out.returncode == 0, out.stderr.decode()
    data = _last_json(out)
    # two runs that differ only by start method are labelled by it
    assert data["runs"] == {"fork": [ids["fork"]], "spawn": [ids["spawn"]]}
    metrics = {m["name"]: m for m in data["metrics"]}
    for method, run in runs.items():
        value = {name: (m["values"][method] or {}).get("median") for name, m in metrics.items()}
        procs = run["processes"]
        workers = [p for p in procs if p["role"] == "pool worker"]
        # each figure is the run's own, as `gpuscope run --json` reported it
        assert value["wall_s"] == pytest.approx((run["ended_ns"] - run["started_ns"]) / 1e9, abs=1e-6), method
        assert value["cpu_s"] == round(sum(p["cpu_seconds"] for p in procs if p["cpu_seconds"] is not None), 3)
        assert value["peak_rss_bytes"] == sum(p["peak_rss_bytes"] for p in procs if p["peak_rss_bytes"])
        assert value["peak_rss_per_worker_bytes"] == _median([p["peak_rss_bytes"] for p in workers
                                                             if p["peak_rss_bytes"]])
        assert value["processes"] == len(procs) and value["processes[pool worker]"] == len(workers) == 2
        # in order: a worker starts, then the first task; the run goes on after it
        main = next(p for p in procs if p["role"] == "main")
        first_worker_ms = (min(p["started_ns"] for p in workers) - main["started_ns"]) / 1e6
        assert first_worker_ms <= value["first_task_ms"] < 1000 * value["wall_s"], (method, value, first_worker_ms)
        assert 0 < value["child_startup_ms"] < value["first_task_ms"], (method, value)
        assert 0 <= value["main_reimport_ms"] < value["first_task_ms"], (method, value)
    assert metrics["processes[pool worker]"]["values"]["fork"]["median"] == 2
    assert metrics["processes[pool worker]"]["values"]["spawn"]["median"] == 2
    assert metrics["processes[resource tracker]"]["values"]["spawn"]["median"] == 1
    # a spawn child starts a fresh interpreter: its start-up is slower than a fork child's
    startup = metrics["child_startup_ms"]["values"]
    assert startup["spawn"]["median"] > startup["fork"]["median"]
    # gpuscope's own share of it is stated, and left out of the start-up: spawn children run the
    # hook (a few ms of their start), fork children run none
    hook = metrics["hook_ms"]["values"]
    assert hook["fork"] is None
    assert 0 < hook["spawn"]["median"] < startup["spawn"]["median"]
    rows = {r["name"]: r for r in data["ranges"]}
    for method, run in runs.items():
        totals = [t for p in run["processes"] for t in p["top_ranges"] if t["name"] == "expensive_op"]
        assert rows["expensive_op"]["values"][method]["count"] == sum(t["count"] for t in totals) == 3
        assert rows["expensive_op"]["values"][method]["total_ns"] == sum(t["total_ns"] for t in totals)
    # one run each: the verdict says that it cannot tell a difference from noise, and no metric is "beyond"
    assert "cannot separate a difference from noise" in data["verdict"]
    assert not any(m["beyond_noise"] for m in data["metrics"])
    text = gpuscope("compare", ids["fork"][:-1], ids["spawn"], env=run_env)
    assert text.returncode == 0 and b"Child start-up" in text.stdout and b"verdict:" in text.stdout
    assert b"gpuscope's share" in text.stdout


def test_compare_unknown_run(run_env):
    out = gpuscope("compare", "nope", "nada", env=run_env)
    assert out.returncode == 2 and out.stderr.decode().count("\n") == 1
    assert "no run 'nope'" in out.stderr.decode()


def test_compare_needs_two_runs(run_env):
    for argv in (("compare",), ("compare", "only-one"), ("compare", "same", "same")):
        out = gpuscope(*argv, env=run_env)
        assert out.returncode == 2 and out.stderr.decode().count("\n") == 1, argv
        assert "at least two run ids" in out.stderr.decode()
        assert b"Traceback" not in out.stderr
