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


def _nccl_rank(path, rank: int, late_us: float) -> None:
    """SYNTHETIC: a rank's record_param_comms events with Seq and process group (newer torch's args),
    each arriving ``late_us`` after the step starts; an extra group's call in between."""
    events = []
    for n in range(3):
        t0 = 1000.0 + n * 10_000
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 10 + rank,
                       "tid": 1, "ts": t0, "dur": 9000.0, "args": {}})
        events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 10 + rank, "tid": 1,
                       "ts": t0 + late_us, "dur": 8000.0 - late_us,
                       "args": {"Seq": n, "Process Group Name": "0", "Collective name": "allreduce"}})
        if rank == 0:   # a call in another group with the same Seq: not matched with group 0's
            events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 10, "tid": 1,
                           "ts": t0 + 10, "dur": 5.0,
                           "args": {"Seq": n, "Process Group Name": "7", "Collective name": "broadcast"}})
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "baseTimeNanoseconds": 0,
                                "traceEvents": events}))


def test_collectives_matched_by_seq_and_group(tmp_path):
    run = tmp_path / "run"
    (run / "torch").mkdir(parents=True)
    _nccl_rank(run / "torch" / "r0.json", 0, late_us=100.0)
    _nccl_rank(run / "torch" / "r1.json", 1, late_us=3100.0)
    t = torch_ops(run)
    matched = sorted(t.collectives, key=lambda c: c.key)
    assert [c.key for c in matched] == [("seq", "0", 0), ("seq", "0", 1), ("seq", "0", 2)]
    for c in matched:
        assert c.last_rank == 1 and c.wait_ns(0) == 3_000_000 and c.wait_ns(1) == 0
    assert [s.wait_by_rank[0] for s in t.steps] == [3000.0] * 3
    assert t.straggler is not None and t.straggler.rank == 1
