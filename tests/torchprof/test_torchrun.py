"""``gpuscope run --launcher torchrun --nproc 2 --torch-profile`` on a gloo DDP loop that has no
profiler in it: a trace per rank in the run, counts equal to what the loop did, one clock, and
the program's output and exit status as without the option."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests import requires
from tests.torchprof.conftest import SCRIPTS, Ran, gpuscope_run, name_counts, trace_events

STEPS = 4
LINEARS = 2   # the model's Linear layers: one aten::linear (an aten::addmm) each per forward


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    requires.torch()
    env = dict(os.environ)
    env["GPUSCOPE_HOME"] = str(tmp_path_factory.mktemp("gshome"))
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def profiled(env) -> Ran:
    ran = gpuscope_run(env, "--launcher", "torchrun", "--nproc", "2", "--torch-profile",
                       str(SCRIPTS / "ddp_loop.py"), str(STEPS))
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran


@pytest.mark.torch
def test_both_ranks_traces_are_in_the_run_and_its_json(profiled):
    traces = profiled.traces()
    assert sorted(t["rank"] for t in traces) == [0, 1]
    rank_pids = {p["rank"]: p["pid"] for p in profiled.record["processes"] if p["role"].startswith("rank ")}
    for t in traces:
        assert t["pid"] == rank_pids[t["rank"]]
        assert t["path"] == f"torch/rank{t['rank']}-{t['pid']}.json.gz"
        assert (profiled.run_dir / t["path"]).is_file()
        # the file adds one span of its own ("PyTorch Profiler (0)", category Trace) to the events
        ops = [e for e in trace_events(profiled.run_dir / t["path"]) if e.get("cat") != "Trace"]
        assert t["events"] == len(ops)


@pytest.mark.torch
def test_operator_and_step_counts_equal_what_the_loop_did(profiled):
    for t in profiled.traces():
        counts = name_counts(profiled.run_dir / t["path"])
        assert counts["aten::linear"] == LINEARS * STEPS, t
        assert counts["aten::addmm"] == LINEARS * STEPS, t
        assert counts["Optimizer.step"] == STEPS, t
        assert counts["gpuscope:clock"] == 3


@pytest.mark.torch
def test_each_rank_is_on_gpuscopes_clock(profiled):
    """Shifted by its offset, each rank's first operator lies inside that rank's life on the event
    logs' clock (CLOCK_MONOTONIC): after its log's anchor, before now."""
    anchors = {int(p.name.split("-")[0]): int(p.name.split("-")[1].split(".")[0])
               for p in (profiled.run_dir / "events").glob("*.log")}
    for t in profiled.traces():
        assert t["clock_method"] == "marker" and t["clock_uncertainty_ns"] >= 0
        events = trace_events(profiled.run_dir / t["path"])
        base = _base_ns(profiled.run_dir / t["path"])
        first = min(e["ts"] for e in events if e["name"] == "aten::linear")
        mono = base + round(first * 1000) + t["clock_offset_ns"]
        assert anchors[t["pid"]] < mono < time.monotonic_ns()


def _printed(ran: Ran) -> list[str]:
    return sorted(re.findall(r"rank \d loss [0-9.]+", "\n".join(ran.lines)))


def _base_ns(path: Path) -> int:
    import gzip
    import json

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return int(json.load(fh)["baseTimeNanoseconds"])


@pytest.mark.torch
def test_output_and_exit_status_as_without_the_option(profiled, env):
    plain = gpuscope_run(env, "--launcher", "torchrun", "--nproc", "2", str(SCRIPTS / "ddp_loop.py"), str(STEPS))
    assert plain.returncode == profiled.returncode == 0
    # the ranks write at once through torchrun: their lines may interleave, so compare what each printed
    assert _printed(plain) == _printed(profiled)
    assert len(_printed(plain)) == 2
    assert plain.record["torch_traces"] == []
    assert not (plain.run_dir / "torch").exists()
