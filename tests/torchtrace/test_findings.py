"""The torch-ops findings on real traces (the DDP job's three cycles: balanced, a slow rank, a slow
DataLoader) and, for the CUDA rules, on SYNTHETIC traces in Kineto's schema (synthetic_cuda.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.findings import registry
from gpuscope.findings.registry import RunInputs
from gpuscope.torchtrace.ops import key_averages
from gpuscope.torchtrace.reader import read_trace
from tests.torchtrace.conftest import make_run
from tests.torchtrace.synthetic_cuda import make_trace

TORCH_CODES = ("torch-slow-rank", "torch-collective-wait", "torch-dataloader-wait", "torch-launch-bound",
               "torch-sync-in-step")


def _found(run: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in registry.run_after(RunInputs(str(run))):
        if f.code in TORCH_CODES or f.code == "rule-failed" and "torch" in f.title:
            out.setdefault(f.code, []).append(f)
    return out


def test_rules_are_registered():
    assert all(registry.get(code) is not None for code in TORCH_CODES)


def test_slow_rank_and_collective_wait(ddp_cycles, tmp_path):
    found = _found(make_run(tmp_path, ddp_cycles / "cycle1"))
    assert set(found) == {"torch-slow-rank", "torch-collective-wait"}, found
    slow = found["torch-slow-rank"][0]
    assert slow.title.startswith("rank 1 ") and "slow_part" in slow.title
    wait = found["torch-collective-wait"]
    assert len(wait) == 1 and wait[0].title.startswith("rank 0 ") and "waiting for rank 1" in wait[0].title


def test_dataloader_wait(ddp_cycles, tmp_path):
    found = _found(make_run(tmp_path, ddp_cycles / "cycle2"))
    # both ranks wait for batches; on a loaded machine one may also wait for the other: not asserted
    assert "torch-dataloader-wait" in found and "torch-launch-bound" not in found, found
    assert sorted(f.title.split(":")[0] for f in found["torch-dataloader-wait"]) == ["rank 0", "rank 1"]


def test_balanced_run_is_clean(ddp_cycles, tmp_path):
    assert _found(make_run(tmp_path, ddp_cycles / "cycle0")) == {}


def _cuda_run(tmp_path: Path, name: str, **kw) -> Path:
    run = tmp_path / name / "torch"
    run.mkdir(parents=True)
    make_trace(run / "rank0.4242.pt.trace.json.gz", **kw)
    return run.parent


def test_synthetic_cuda_table():
    """CUDA columns: a kernel's time goes to the op with its External id (aten::mm), its parent's
    CUDA total includes it, the kernel has a row of its own."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.json.gz"
        fig = make_trace(p, steps=2, kernels=10, kernel_us=7.0, gap_us=3.0)
        rows = {(r.name, r.device): r for r in key_averages(read_trace(p))}
    total = fig["kernels"] * fig["kernel_us"]
    assert rows[("aten::mm", False)].self_cuda_us == pytest.approx(total)
    assert rows[("aten::linear", False)].cuda_total_us == pytest.approx(total)
    assert rows[("aten::linear", False)].self_cuda_us == 0
    kernel = rows[("void gemm_kernel<>()", True)]
    assert kernel.count == fig["kernels"] and kernel.self_cuda_us == pytest.approx(total) and kernel.cpu_total_us == 0


@pytest.mark.parametrize(("kw", "codes"), [
    ({"kernel_us": 5.0, "gap_us": 40.0}, {"torch-launch-bound"}),
    ({"kernel_us": 100.0, "gap_us": 0.0}, set()),
    ({"kernel_us": 100.0, "gap_us": 0.0, "sync": True}, {"torch-sync-in-step"}),
])
def test_synthetic_cuda_rules(tmp_path, kw, codes):
    found = _found(_cuda_run(tmp_path, "run", **kw))
    assert set(found) == codes, found
    if "torch-sync-in-step" in codes:
        title = found["torch-sync-in-step"][0].title
        # one stream sync per step; the async copy before it is no sync call
        assert "aten::item" in title and "1.0 GPU-synchronising calls per step" in title
