"""A 2-rank torchrun DDP script on CPU (gloo): both ranks identified, ranges per rank."""

from __future__ import annotations

import pytest

from tests import requires
from tests.runs.helpers import gpuscope, script, summary

requires.torch()


@pytest.mark.torch
def test_two_ranks_identified_with_ranges(run_env):
    proc = gpuscope("run", "--json", "--launcher", "torchrun", "--nproc", "2", script("ddp_gloo.py"),
                    env=run_env, timeout=240)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    result = summary(proc)
    by_role = {p["role"]: p for p in result["processes"]}
    assert "torchrun agent" in by_role
    assert by_role["torchrun agent"]["exit_code"] == 0
    for rank in (0, 1):
        p = by_role[f"rank {rank}"]
        assert p["rank"] == rank
        assert p["name"] == f"gs:rank{rank}"
        assert {"train_step", "all_reduce"} <= set(p["range_names"])
        assert p["ranges"] == 4  # 3 steps + 1 all_reduce
    out = proc.stdout.decode()
    assert "rank 0 of 2 sum 3.0" in out and "rank 1 of 2 sum 3.0" in out
