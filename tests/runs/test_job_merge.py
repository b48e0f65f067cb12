"""Merging the node runs of a job folder (gpuscope.nsys.job) on synthetic node runs whose true
times are known (tests/runs/jobfolder.py): clocks aligned by each node's anchor and offset, pids
repeated across hosts kept apart, ranks and stragglers, the CLI's text and JSON, and its errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from gpuscope.errors import UserError
from gpuscope.nsys.report import load_job, load_report
from tests.runs import jobfolder as J
from tests.runs.helpers import gpuscope

OFFSETS = [0, 5_000_000_000, -3_000_000]     # node 1 is 5 s ahead of node 0, node 2 3 ms behind


@pytest.fixture
def job_dir(tmp_path):
    return J.make_job(tmp_path / "job", nnodes=3, nproc=2, steps=50, offsets=OFFSETS, slow={4: 1.5})


def _step_starts(report, rank: int) -> np.ndarray:
    tl = report.timeline
    pid = next(p["timeline_pid"] for p in report.processes if p["rank"] == rank)
    r = tl.ranges
    return np.sort(r.start_ns[r.pid == pid]) + tl.wall_base_ns


def test_ranks_nodes_and_ranges_of_every_node(job_dir):
    rep = load_report(job_dir)                   # a job folder is recognised by load_report itself
    ranks = [p for p in rep.processes if p["rank"] is not None]
    assert sorted(p["rank"] for p in ranks) == list(range(6))
    for p in ranks:
        assert p["node"] == {"host": f"host{p['rank'] // 2}", "node_rank": p["rank"] // 2}
        assert p["gpuscope_ranges"] == 50 and p["pid"] == 2000 + p["rank"] % 2
    # the same pids on every host: six rank processes and three agents, each its own lane
    assert len(rep.timeline.processes) == 9 and len({p["timeline_pid"] for p in rep.processes}) == 9
    assert rep.timeline.groups and set(rep.timeline.groups.values()) == {f"node {k} · host{k}" for k in range(3)}
    assert [r["rank"] for r in rep.job["ranks"]] == list(range(6))
    assert [n["clock_offset_ns"] for n in rep.job["nodes"]] == OFFSETS
    assert rep.job["clock_residual_max_ns"] == 2_000


def test_clocks_aligned_by_anchor_and_offset(job_dir):
    rep = load_job(job_dir)
    for rank in range(6):
        starts = _step_starts(rep, rank)
        expected = np.array([J.true_start(rank, i) for i in range(50)])
        assert np.array_equal(starts, expected), (rank, starts[:3] - expected[:3])


def test_clock_drift_is_corrected_from_the_start_and_end_offsets(tmp_path):
    """Node 1's clock runs 0.1 % fast (2 ms over the job): the offsets measured at start and end
    move its ranges back onto node 0's clock; with the start offset alone the last ones are 2 ms off."""
    job = J.make_job(tmp_path / "job", nnodes=2, nproc=1, steps=50, offsets=[0, 3_000_000_000], rates={1: 1e-3})
    rep = load_job(job)
    node1 = rep.job["nodes"][1]
    assert node1["clock_drift_ns"] == round((J.T0 + 50 * J.PERIOD + 10**9) * 1e-3) and node1["clock_end_residual_ns"]
    truth = np.array([J.true_start(1, i) for i in range(50)])
    assert np.abs(_step_starts(rep, 1) - truth).max() <= 2           # ns: rounding only
    again = tmp_path / "again"
    J.make_job(again, nnodes=2, nproc=1, steps=50, offsets=[0, 3_000_000_000], rates={1: 1e-3}, measured_end=False)
    rep = load_job(again)
    assert rep.job["nodes"][1]["clock_drift_ns"] is None
    assert np.abs(_step_starts(rep, 1) - truth).max() > 1_900_000    # the drift left in: 2 ms by the last step


def test_without_a_measured_offset_a_node_keeps_its_own_clock(tmp_path):
    """The offset is what aligns: a node whose exchange failed stays off by its clock's error, and says so."""
    job = J.make_job(tmp_path / "job", nnodes=2, nproc=1, steps=10, offsets=[0, 5_000_000_000], measured=False)
    rep = load_job(job)
    assert (_step_starts(rep, 1) - np.array([J.true_start(1, i) for i in range(10)]) == 5_000_000_000).all()
    assert (_step_starts(rep, 0) - np.array([J.true_start(0, i) for i in range(10)]) == 0).all()
    assert any("node 1: clock offset not measured (no answer)" in n for n in rep.notes), rep.notes


def test_stragglers_name_the_slow_rank(job_dir):
    st = load_job(job_dir).job["stragglers"]
    assert st["step"] == "train_step" and st["slowest_rank"] == 4 and st["slowest_over_fastest"] == 1.5
    assert st["spread_ns"] == J.STEP // 2
    # ends of a step: rank 0 at +1 µs, rank 4 (slow, starts 4 µs late) at +5.5 µs, rank 5 at +6 µs
    assert st["end_skew_median_ns"] == 5 * 1_000
    assert load_job(job_dir, step="no such range").job["stragglers"] is None


def test_step_found_the_same_with_a_sparse_table(job_dir, monkeypatch):
    """Many ranks times many names: the (rank, name) pairs that occur, not a dense table; same answer."""
    from gpuscope.trace import merge

    dense = load_job(job_dir).job["stragglers"]
    monkeypatch.setattr(merge, "DENSE_STEP_TABLE", 0)
    assert load_job(job_dir).job["stragglers"] == dense and dense["step"] == "train_step"


def test_missing_node_and_rerun_of_a_node_are_noted(job_dir, tmp_path):
    shutil.rmtree(next(job_dir.glob("node2-*")))
    again = job_dir / "node1-host1-run1b"
    shutil.copytree(next(job_dir.glob("node1-*")), again)
    meta = json.loads((again / "node.json").read_text())
    meta["anchor"]["wall_ns"] += 1
    (again / "node.json").write_text(json.dumps(meta))
    rep = load_job(job_dir)
    assert [n["folder"] for n in rep.job["nodes"]][1].endswith("node1-host1-run1b")
    assert any(n.startswith("node(s) 2 of 3 missing") for n in rep.notes), rep.notes
    assert any(n.startswith("node 1: two runs in this folder") for n in rep.notes), rep.notes


def test_cli_text_and_json(job_dir, run_env):
    proc = gpuscope("report", "--json", str(job_dir), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    assert {"processes", "nvtx_summary", "job", "notes"} <= set(out)
    assert sorted(p["rank"] for p in out["processes"] if p["rank"] is not None) == list(range(6))
    assert out["nvtx_summary"][0]["name"] == "train_step" and out["nvtx_summary"][0]["count"] == 300
    text = gpuscope("report", str(job_dir), env=run_env).stdout.decode()
    assert "Job synthetic: 3 of 3 node(s), 6 rank(s)" in text
    assert "5,000.000" in text and "Stragglers (train_step)" in text and "slowest rank 4" in text, text


def test_cli_errors_are_one_line(tmp_path, run_env):
    J.make_job(tmp_path / "two", nnodes=1, nproc=1, steps=3, job_id="a")
    J.make_job(tmp_path / "other", nnodes=1, nproc=1, steps=3, job_id="b")
    shutil.move(str(next((tmp_path / "other").glob("node0-*"))), str(tmp_path / "two" / "node0-b"))
    proc = gpuscope("report", str(tmp_path / "two"), env=run_env)
    err = proc.stderr.decode().strip()
    assert proc.returncode != 0 and "holds node runs of several jobs (a, b): pick one with --job ID" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    ok = gpuscope("report", "--json", "--job", "b", str(tmp_path / "two"), env=run_env)
    assert ok.returncode == 0 and json.loads(ok.stdout)["job"]["job_id"] == "b", ok.stderr
    bad = gpuscope("report", "--job", "b", str(tmp_path / "other"), env=run_env)
    assert bad.returncode != 0 and "--job / --step are for a job folder" in bad.stderr.decode()
    (tmp_path / "two" / "node0-b" / "node.json").write_text("{")
    broken = gpuscope("report", "--job", "b", str(tmp_path / "two"), env=run_env)
    assert broken.returncode != 0 and "unreadable node record" in broken.stderr.decode()
    assert "Traceback" not in broken.stderr.decode()


def test_read_nodes_picks_a_job(tmp_path):
    from gpuscope.nsys.job import read_nodes

    J.make_job(tmp_path / "j", nnodes=1, nproc=1, steps=1)
    with pytest.raises(UserError, match="no node runs of job 'x'"):
        read_nodes(tmp_path / "j", "x")
    with pytest.raises(UserError, match="no node runs here"):
        read_nodes(tmp_path, None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no gpuscope event logs \(events/\) and no node runs of a job"):
        load_report(tmp_path / "empty")     # what File → Open job says of a folder that is neither
