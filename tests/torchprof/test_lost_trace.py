"""A rank killed before its profiler could save says so in the run: which rank, and why."""

from __future__ import annotations

import pytest

from tests import requires
from tests.torchprof.conftest import SCRIPTS, gpuscope_run


@pytest.mark.torch
def test_a_killed_rank_is_named_with_its_cause(run_env):
    requires.torch()
    ran = gpuscope_run(run_env, "--launcher", "torchrun", "--nproc", "2", "--torch-profile",
                       str(SCRIPTS / "killed_rank.py"))
    assert ran.returncode != 0
    traces = ran.traces()
    assert [t["rank"] for t in traces] == [0]
    killed = next(p for p in ran.record["processes"] if p["role"] == "rank 1")
    lost = [n for n in ran.record["notes"] if "lost its trace" in n]
    # torchrun's agent reaps its ranks: the run knows that rank 1 ended without its exit record, not the signal
    why = (f"killed by {killed['exit_signal']} before it could save it" if killed["exit_signal"] else
           "it ended without running its exit handlers (killed, or a crash)")
    assert lost == [f"torch profiler: rank 1 (pid {killed['pid']}) lost its trace: {why}"]
