"""A parent and a Pool(2) with @nvtx.annotate tasks: three processes with ranges, any start method."""

from __future__ import annotations

import pytest

from tests.runs.helpers import gpuscope, script, summary, with_ranges


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_three_processes_have_ranges(method, run_env):
    proc = gpuscope("run", "--json", "--start-method", method, script("pool_nvtx.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    result = summary(proc)
    assert result["exit_code"] == 0 and result["signal"] is None
    ranged = with_ranges(result["processes"])
    roles = sorted(p["role"] for p in ranged)
    assert roles == ["main", "pool worker", "pool worker"], result["processes"]
    for p in ranged:
        assert "expensive_op" in p["range_names"], p
        assert p["start_method"] == method, p
    workers = [p for p in ranged if p["role"] == "pool worker"]
    main = next(p for p in ranged if p["role"] == "main")
    for w in workers:
        # the task range gpuscope adds, named after the user's function
        assert "gpuscope:expensive_op" in w["range_names"]
        assert w["ranges"] == 2  # one task range + one nvtx range
        assert w["name"].startswith("gs:pool")
    assert main["ranges"] == 1 and main["name"] == "gs:main"
    # the chosen method reached the script itself
    assert f"start method {method}".encode() in proc.stderr


def test_default_changes_nothing(run_env):
    proc = gpuscope("run", "--json", script("pool_nvtx.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    import multiprocessing

    assert f"start method {multiprocessing.get_start_method()}".encode() in proc.stderr
