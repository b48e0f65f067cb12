"""Steps, waits and the straggler over ranks, and the CLI's JSON, on the real DDP job's traces."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

from gpuscope.torchtrace.report import torch_ops
from tests.torchtrace.conftest import make_run


def test_straggler_is_the_rank_the_others_wait_for(ddp_cycles, tmp_path):
    t = torch_ops(make_run(tmp_path, ddp_cycles / "cycle1"))
    assert [s.step for s in t.steps] == [5, 6, 7]
    # rank 1 sleeps 150 ms more per step: rank 0 waits it out in allreduce (order, no time bounds)
    assert sum(s.slowest_rank == 1 for s in t.steps) >= 2
    assert sum(s.wait_by_rank[0] > s.wait_by_rank[1] for s in t.steps) >= 2
    assert t.straggler is not None and t.straggler.rank == 1 and t.straggler.steps_slowest >= 2
    assert all(c.last_rank == 1 for c in t.collectives if c.name == "gloo:all_reduce")
    slow = next(r for r in t.across if r.name == "slow_part")
    assert set(slow.by_rank) == {1} and slow.slowest_rank == 1


def test_cli_json_per_rank(ddp_cycles, tmp_path):
    run = make_run(tmp_path, ddp_cycles / "cycle0")
    out = subprocess.run([sys.executable, "-m", "gpuscope", "report", str(run), "--torch-ops", "--json",
                          "--sort", "cpu_total"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"ranks", "ops_across_ranks", "steps"}
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        trace = next((run / "torch").glob(f"rank{r['rank']}.{r['pid']}.*"))
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
        ops = {op["name"]: op for op in r["ops"]}
        for name in ("aten::addmm", "aten::linear", "Optimizer.step#SGD.step"):
            assert ops[name]["count"] == sum(e.get("name") == name for e in events) > 0
        totals = [op["cpu_total_us"] for op in r["ops"]]
        assert totals == sorted(totals, reverse=True)
        assert set(r["ops"][0]) >= {"name", "count", "self_cpu_us", "cpu_total_us", "self_cuda_us", "cuda_total_us"}
    one = subprocess.run([sys.executable, "-m", "gpuscope", "report", str(run), "--torch-ops", "--rank", "1"],
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0 and "rank 1" in one.stdout and "rank 0 (pid" not in one.stdout
