"""The key_averages table from the trace equals torch.profiler's own key_averages of the same
profile (a real 2-rank gloo DDP job that exported both)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gpuscope.torchtrace.ops import ASYNC_PREFIXES, key_averages, sort_rows
from gpuscope.torchtrace.reader import read_trace

TIME_TOLERANCE_US = 0.002      # the trace's microseconds have three decimals: 1 ns per event either way


def _pairs(folder: Path):
    for trace in sorted(folder.glob("*.pt.trace.json.gz")):
        ref = json.loads(Path(str(trace).replace(".pt.trace.json.gz", ".key_averages.json")).read_text())
        yield trace, ref


@pytest.mark.parametrize("cycle", ["cycle0", "cycle1", "cycle2"])
@pytest.mark.parametrize("mode", ["plain", "shapes"])
def test_table_equals_torch_key_averages(ddp_cycles, cycle, mode):
    pairs = list(_pairs(ddp_cycles / cycle))
    assert len(pairs) == 2
    for trace, ref in pairs:
        mine = {(r.name, r.shapes): r for r in key_averages(read_trace(trace), by_shapes=mode == "shapes")}
        assert len(mine) == len(ref[mode]), trace
        for want in ref[mode]:
            got = mine[(want["name"], want["shapes"])]
            assert got.count == want["count"], want["name"]
            assert got.cpu_mem == want["cpu_mem"] and got.self_cpu_mem == want["self_cpu_mem"], want["name"]
            if want["name"].startswith(ASYNC_PREFIXES):
                # a process-group event still running when a cycle stops: the exported trace and
                # torch's in-memory list can hold different ends (docs/TORCH-PROFILER.md)
                assert got.self_cpu_us == want["self_cpu_us"] == 0
                continue
            for key in ("self_cpu_us", "cpu_total_us"):
                assert abs(getattr(got, key) - want[key]) <= TIME_TOLERANCE_US * want["count"], (want["name"], key)


def test_counts_equal_the_trace_file(ddp_cycles):
    """aten::addmm and the optimizer step: as many as the trace file holds (read with json)."""
    trace = sorted((ddp_cycles / "cycle0").glob("rank0.*.gz"))[0]
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    rows = {r.name: r for r in key_averages(read_trace(trace))}
    for name in ("aten::addmm", "aten::linear", "Optimizer.step#SGD.step"):
        assert rows[name].count == sum(e.get("name") == name for e in events) > 0


def test_sort_and_columns(ddp_cycles):
    trace = sorted((ddp_cycles / "cycle1").glob("rank1.*.gz"))[0]
    rows = key_averages(read_trace(trace))
    by_self = sort_rows(rows, "self_cpu")
    assert by_self[0].name == "slow_part"          # the rank's sleep inside a record_function
    totals = [r.cpu_total_us for r in sort_rows(rows, "cpu_total")]
    assert totals == sorted(totals, reverse=True) and sort_rows(rows, "cpu_total")[0].name == "ProfilerStep*"
    assert all(r.self_cpu_us <= r.cpu_total_us + TIME_TOLERANCE_US * r.count for r in rows)
    assert all(r.self_cuda_us == 0 for r in rows)   # a CPU-only profile
