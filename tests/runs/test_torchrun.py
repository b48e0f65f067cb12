"""One 2-rank torchrun DDP job on CPU (gloo), run once for the whole file, started as a module with
an --annotate pattern on an inherited method:

    gpuscope run --json --launcher torchrun --nproc 2 --annotate torch.optim.adamw:AdamW.step -m modpkg.ddp

Each rank imports torch (tens of seconds on a loaded 2-core runner), so the checks of ranks,
ranges, exact figures, modules and --annotate share the one run.
"""

from __future__ import annotations

import pytest

from gpuscope.trace.process_row import ProcessRow
from tests import requires
from tests.runs.helpers import SCRIPTS, gpuscope, summary

requires.torch()
pytestmark = pytest.mark.torch

MIB = 1 << 20
PATTERN = "torch.optim.adamw:AdamW.step"   # AdamW inherits step() from Adam in current torch


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    import os

    env = dict(os.environ, GPUSCOPE_HOME=str(tmp_path_factory.mktemp("torchrun_home")))
    env.pop("PYTHONPATH", None)
    proc = gpuscope("run", "--json", "--launcher", "torchrun", "--nproc", "2", "--cwd", str(SCRIPTS),
                    "--annotate", PATTERN, "-m", "modpkg.ddp", env=env, timeout=580)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    result = summary(proc)
    return proc, result, {p["role"]: p for p in result["processes"]}


def _counts(row: dict) -> dict[str, int]:
    return {t["name"]: t["count"] for t in row["top_ranges"]}


def test_two_ranks_identified_with_ranges(job):
    proc, _, by_role = job
    assert "torchrun agent" in by_role
    for rank in (0, 1):
        p = by_role[f"rank {rank}"]
        assert p["rank"] == rank
        assert p["name"] == f"gs:rank{rank}"
        assert {"train_step", "all_reduce"} <= set(p["range_names"])
        counts = _counts(p)
        assert (counts["train_step"], counts["all_reduce"]) == (3, 1), counts
    out = proc.stdout.decode()
    assert "rank 0 of 2 sum 3.0 module modpkg.ddp" in out and "rank 1 of 2 sum 3.0 module modpkg.ddp" in out


def test_ranks_have_exit_codes_and_exact_usage(job):
    _, result, _ = job
    rows = {r.role: r for r in (ProcessRow.from_dict(p) for p in result["processes"])}
    for rank in (0, 1):
        r = rows[f"rank {rank}"]
        assert (r.exit_code, r.exit_source, r.exit_how) == (0, "process", "end"), r
        assert r.cpu_source == "exact" and r.cpu_seconds > 0.05 and r.peak_rss_bytes > 50 * MIB, r
    assert rows["torchrun agent"].exit_code == 0


def test_module_ranks_with_inherited_annotate(job):
    _, result, by_role = job
    for rank in (0, 1):
        p = by_role[f"rank {rank}"]
        assert p["info"]["argv"][-2:] == ["-m", "modpkg.ddp"]
        assert "gpuscope:AdamW.step" in p["range_names"], p
        assert _counts(p).get("gpuscope:AdamW.step") == 3, p["top_ranges"]
    from gpuscope.runs.annotate_notes import annotate_notes

    assert annotate_notes(result["run_dir"], [PATTERN]) == [
        f"--annotate {PATTERN}: 1 function (AdamW.step), 6 calls recorded in 2 processes"]
    assert any(n.startswith(f"--annotate {PATTERN}: 1 function") for n in result["notes"]), result["notes"]
