"""`gpuscope compare`: a fork run and a spawn run of the same script, side by side."""

from __future__ import annotations

import json

from tests.runs.helpers import gpuscope, script, summary


def test_compare_fork_and_spawn(run_env):
    ids = {}
    for method in ("fork", "spawn"):
        proc = gpuscope("run", "--json", "--quiet", "--start-method", method, script("pool_nvtx.py"), env=run_env)
        ids[method] = summary(proc)["run_id"]
    out = gpuscope("compare", "--json", ids["fork"], ids["spawn"], env=run_env)
    assert out.returncode == 0, out.stderr.decode()
    data = json.loads(out.stdout)
    assert data["a"]["label"] == "fork" and data["b"]["label"] == "spawn"
    assert data["a"]["processes"]["pool worker"] == 2 and data["b"]["processes"]["pool worker"] == 2
    assert "resource tracker" in data["b"]["processes"]
    # a spawn child starts a fresh interpreter: its start-up is slower than a fork child's
    assert data["b"]["child_startup_ms"] > data["a"]["child_startup_ms"]
    # gpuscope's own share of it is stated, and left out of the start-up: spawn children run the
    # hook (a few ms of their start), fork children run none
    assert data["a"]["hook_ms"] is None
    assert 0 < data["b"]["hook_ms"] < data["b"]["child_startup_ms"]
    rows = {r["name"]: r for r in data["ranges"]}
    assert rows["expensive_op"]["a_count"] == 3 and rows["expensive_op"]["b_count"] == 3
    text = gpuscope("compare", ids["fork"][:-1], ids["spawn"], env=run_env)
    assert text.returncode == 0 and b"child start-up" in text.stdout and b"gpuscope's share" in text.stdout


def test_compare_unknown_run(run_env):
    out = gpuscope("compare", "nope", "nada", env=run_env)
    assert out.returncode == 2 and out.stderr.decode().count("\n") == 1
    assert "no run 'nope'" in out.stderr.decode()
