"""A run's PyTorch profiler traces in the report, without Qt: both ranks' ops on the timeline on
gpuscope's clock (inside their NVTX step ranges), their lanes, and each table row's events.

The run is real (torchrun, 2 gloo ranks, gpuscope's --torch-profile); the CUDA part uses a
SYNTHETIC Kineto trace (tests/torchtrace/synthetic_cuda.py): no GPU here records one."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpuscope import api
from gpuscope.torchtrace.report import build
from gpuscope.torchtrace.run import load_run
from gpuscope.trace import timeline as T
from gpuscope.views import timeline_lod as L
from gpuscope.views import timeline_query as Q
from gpuscope.views import timeline_text as TT
from gpuscope.views import torch_ops as V
from tests.torchtrace.synthetic_cuda import make_trace
from tests.views.torch_run import RECORDED_STEPS, torch_run

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return torch_run(tmp_path_factory)


@pytest.fixture(scope="module")
def report(run_dir):
    rep = api.load_report(run_dir)
    assert len(rep.timeline.ranges)   # the torch rows are placed when the timeline is read
    return rep


def _named(tl: T.Timeline, pid: int, source: int, prefix: str) -> np.ndarray:
    r = tl.ranges
    names = np.array([tl.strings.values[i].startswith(prefix) for i in r.name_id.tolist()], bool)
    return np.flatnonzero(names & (r.pid == pid) & (r.source == source))


def _trace_names(path: str) -> list[str]:
    with gzip.open(path, "rt") as fh:
        return [e["name"] for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def test_each_ranks_optimizer_steps_lie_in_its_nvtx_steps(report):
    """On one clock: every optimizer step the profiler recorded lies inside one of the rank's own
    NVTX "step N" ranges, within the clock uncertainty measured at profile start."""
    tl, torch = report.timeline, report.torch
    assert torch.ranks == [0, 1]
    for x in torch.ops.ranks:
        pid, unc = x.trace.pid, x.trace.clock_uncertainty_ns
        assert unc is not None, "gpuscope's profiler measures the clock offset"
        opt = _named(tl, pid, T.SOURCE_TORCH, "Optimizer.step#")
        steps = _named(tl, pid, T.SOURCE_GPUSCOPE, "step ")
        count = next(r.count for r in x.ops if r.name.startswith("Optimizer.step#"))
        assert len(opt) == count == RECORDED_STEPS and len(steps) >= RECORDED_STEPS
        r = tl.ranges
        for i in opt.tolist():
            inside = (r.start_ns[steps] - unc <= r.start_ns[i]) & (r.end_ns[i] <= r.end_ns[steps] + unc)
            assert inside.sum() == 1, (x.rank, tl.strings.values[r.name_id[i]])


def test_no_op_runs_while_rank_1_sleeps_in_its_slow_part(report):
    """Both sides of the clock: rank 1 sleeps inside an NVTX "slow part" range between the previous
    step's optimizer step and the next forward, so no operator of its main thread (the profiler's
    step range aside) may overlap it, by more than the clock uncertainty, on either side."""
    tl, torch = report.timeline, report.torch
    x = next(x for x in torch.ops.ranks if x.rank == 1)
    pid, unc = x.trace.pid, int(x.trace.clock_uncertainty_ns)
    r = tl.ranges
    ops = np.flatnonzero((r.pid == pid) & (r.tid == pid) & (r.source == T.SOURCE_TORCH))
    ops = ops[[not tl.strings.values[i].startswith("ProfilerStep#") for i in r.name_id[ops].tolist()]]
    first, last = int(r.start_ns[ops].min()), int(r.end_ns[ops].max())
    slow = [i for i in _named(tl, pid, T.SOURCE_GPUSCOPE, "slow part").tolist()
            if first < r.start_ns[i] and r.end_ns[i] < last]
    assert slow, "a slow part inside the profiled steps"
    for i in slow:
        a, b = int(r.start_ns[i]) + unc, int(r.end_ns[i]) - unc
        overlap = ops[(r.start_ns[ops] < b) & (r.end_ns[ops] > a)]
        assert not len(overlap), [tl.strings.values[n] for n in r.name_id[overlap].tolist()]


def test_torch_lanes_follow_the_threads_nvtx_lane(report):
    """Each rank's process block: its main thread's NVTX lane, then that thread's torch ops lane,
    whose tooltip says how the trace was put on gpuscope's clock."""
    layout = L.build_layout(report.timeline)
    for x in report.torch.ops.ranks:
        block = next(b for b in layout.processes if b.pid == x.trace.pid)
        kinds = [(ln.tid, ln.source) for ln in block.lanes]
        main_nvtx = kinds.index((x.trace.pid, T.SOURCE_GPUSCOPE))
        assert kinds[main_nvtx + 1] == (x.trace.pid, T.SOURCE_TORCH)
        lane = block.lanes[main_nvtx + 1]
        assert lane.label.endswith("torch ops") and len(lane.rows) > 1   # nested ops: one row per depth
        note = TT.lane_note(lane, report.timeline)
        assert f"rank {x.rank}" in note and "±" in note


def test_a_rows_events_are_the_traces_events(report):
    """A key_averages row highlights its operator's events: as many as the trace file holds, on
    that rank's process; all ranks: both ranks' together."""
    tl, torch = report.timeline, report.torch
    total = 0
    for x in torch.ops.ranks:
        table, idx = V.events_of(torch, "aten::addmm", x.rank)
        want = _trace_names(x.trace.path).count("aten::addmm")
        assert table == "ranges" and len(idx) == want > 0
        assert set(tl.ranges.pid[idx].tolist()) == {x.trace.pid}
        assert {tl.strings.values[i] for i in tl.ranges.name_id[idx].tolist()} == {"aten::addmm"}
        total += want
    assert len(V.events_of(torch, "aten::addmm")[1]) == total


def test_a_step_rows_events_are_each_ranks_profiler_step(report):
    tl, torch = report.timeline, report.torch
    step = torch.ops.steps[0].step
    _, idx = V.events_of(torch, "", step=step)
    assert sorted(tl.ranges.pid[idx].tolist()) == sorted(x.trace.pid for x in torch.ops.ranks)
    assert {tl.strings.values[i] for i in tl.ranges.name_id[idx].tolist()} == {f"ProfilerStep#{step}"}


def test_all_ranks_table_sums_the_ranks(report):
    torch = report.torch
    rows = {r.name: r for r in V.op_rows(torch, None)}
    for name in ("aten::addmm", "Optimizer.step#SGD.step"):
        per_rank = [next(r for r in x.ops if r.name == name) for x in torch.ops.ranks]
        assert rows[name].count == sum(r.count for r in per_rank)
        assert rows[name].self_cpu_us == pytest.approx(sum(r.self_cpu_us for r in per_rank))


def test_rows_by_input_shapes_split_the_operators_events(report):
    """Grouped by input shapes (the run recorded them): an operator's rows add up to its row, and
    each highlights exactly its own calls."""
    torch = report.torch
    assert V.has_shapes(torch)
    grouped = V.group_by_shapes(torch)
    for x in torch.ops.ranks:
        plain = next(r for r in x.ops if r.name == "aten::addmm")
        rows = [r for r in grouped[x.rank] if r.name == "aten::addmm"]
        assert len(rows) >= 2 and sum(r.count for r in rows) == plain.count      # two Linear layers
        for r in rows:
            assert len(V.events_of(torch, r.name, x.rank, shapes=r.shapes)[1]) == r.count, r.shapes
    both = {(r.name, r.shapes): r.count for r in V.op_rows(torch, None, shapes=True)}
    assert sum(c for (n, _), c in both.items() if n == "aten::addmm") == len(V.events_of(torch, "aten::addmm")[1])


def test_nvtx_summary_and_measure_keep_torch_apart(report):
    """The NVTX summary's rows match no torch event; a measured span names torch events as such."""
    tl = report.timeline
    assert len(Q.matching(tl, "nvtx", "aten::addmm")[1]) == 0
    assert len(Q.matching(tl, "nvtx", "step 1")[1]) == 2          # one per rank
    m = Q.measure(tl, int(tl.ranges.start_ns.min()), int(tl.ranges.end_ns.max()))
    kinds = {(r.kind, r.name): r.count for r in m.rows}
    assert kinds[("torch", "aten::addmm")] == len(V.events_of(report.torch, "aten::addmm")[1])
    assert ("nvtx", "aten::addmm") not in kinds and kinds[("nvtx", "step 1")] == 2


def test_details_of_a_torch_op(report):
    layout = L.build_layout(report.timeline)
    lane = next(ln for b in layout.processes for ln in b.lanes if ln.source == T.SOURCE_TORCH)
    d = TT.range_details(layout, lane, lane.rows[0], 0, {})
    assert d["kind"] == "torch" and d["source"] == "torch" and "±" in d["clock"]
    assert ("clock", d["clock"]) in TT.detail_pairs(d)


def test_a_cut_trace_is_a_note_and_the_other_rank_stays(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    summary = json.loads((copy / "summary.json").read_text())
    cut = copy / next(t["path"] for t in summary["torch_traces"] if t["rank"] == 1)
    cut.write_bytes(gzip.compress(gzip.decompress(cut.read_bytes())[:5000]))
    rep = api.load_report(copy)
    assert rep.torch.ranks == [0]
    assert any(cut.name in n and "cut short" in n for n in rep.notes), rep.notes
    pid0 = rep.torch.pid_of(0)
    assert (rep.timeline.ranges.source == T.SOURCE_TORCH).sum() > 0
    assert set(rep.timeline.ranges.pid[rep.timeline.ranges.source == T.SOURCE_TORCH].tolist()) == {pid0}


def test_a_timeline_read_later_reads_the_traces_with_it(run_dir):
    """A report whose timeline is not read yet (an nsys export's lazy read) gets its torch part
    when the timeline is read: the summaries do not wait for the traces."""
    from gpuscope.nsys.report import load_events

    rep = load_events(run_dir)
    tl, rep.loaded = rep.loaded, None
    rep.loader = lambda: tl
    V.attach(rep, run_dir)
    assert rep.torch is None and not (tl.ranges.source == T.SOURCE_TORCH).any()
    assert (rep.timeline.ranges.source == T.SOURCE_TORCH).any() and rep.torch.ranks == [0, 1]
    assert set(rep.torch.placed) == {0, 1}


def test_a_run_without_traces_has_no_torch_part(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("torch"))
    summary = json.loads((copy / "summary.json").read_text())
    summary.pop("torch_traces", None)
    (copy / "summary.json").write_text(json.dumps(summary))
    rep = api.load_report(copy)
    assert rep.torch is None and not (rep.timeline.ranges.source == T.SOURCE_TORCH).any()


def test_synthetic_gpu_events_get_lanes_of_their_own(tmp_path):
    """SYNTHETIC CUDA trace: kernels go to a "GPU d stream s torch" lane of the process, on the
    timeline's wall clock (the trace has no measured offset), and a device row highlights them."""
    (tmp_path / "torch").mkdir()
    figures = make_trace(tmp_path / "torch" / "rank0.json.gz", steps=2, kernels=5)
    run = load_run(tmp_path)
    torch = V.TorchReport(build(run))
    tl = T.Timeline(wall_base_ns=run.traces[0].meta["baseTimeNanoseconds"], mono_base_ns=0)
    V.add_to_timeline(tl, torch)
    assert len(tl.kernels) == figures["kernels"] and tl.torch_rows["kernels"] == 0
    assert int(tl.kernels.start_ns.min()) > 0     # placed after the trace's base, not shifted to zero
    layout = L.build_layout(tl)
    lanes = [ln for b in layout.processes for ln in b.lanes if ln.kind == L.KIND_GPU]
    assert [ln.label for ln in lanes] == ["GPU 0 stream 7 torch"] and lanes[0].pid == run.traces[0].pid
    table, idx = V.events_of(torch, "void gemm_kernel<>()", 0, device=True)
    assert table == "kernels" and len(idx) == figures["kernels"]
    d = TT.range_details(layout, lanes[0], lanes[0].rows[0], 0, {})
    assert d["source"] == "torch" and "wall clock" in d["clock"]
