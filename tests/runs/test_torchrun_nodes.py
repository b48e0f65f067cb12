"""Two torchrun "nodes" on this machine: two ``gpuscope run --nnodes 2 --node-rank 0|1`` against one
c10d rendezvous on localhost (CPU, gloo), each with 2 ranks of tests/runs/scripts/modpkg/ddp.py
(node 0 with the flags, node 1 without them, as under srun: SLURM_JOB_ID, SLURM_NNODES,
SLURM_NODEID, SLURM_NODELIST and MASTER_PORT say the same),
then ``gpuscope report JOB_DIR --json`` merges the two node runs. Node 1's clock readings are
shifted by 7 s (the test hook GPUSCOPE_TEST_CLOCK_SHIFT_NS): the exchange must find the 7 s again
and the merged timeline must line the ranks up as if the clocks agreed.

One job for the whole file (each rank imports torch: tens of seconds on a loaded runner); the file
is one xdist group (tests/conftest.py), so both nodes start on one worker. Both nodes are stopped
if either fails or the rendezvous hangs (torchrun's join timeout is 240 s; the test's own is 420 s).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests import requires
from tests.runs.helpers import SCRIPTS, summary

requires.torch()
pytestmark = [pytest.mark.torch, pytest.mark.timeout(600)]

SHIFT_NS = 7_000_000_000
NPROC = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """gpuscope's own stop (it ends its run's tree): SIGINT, a second one at once kills the tree."""
    for sig in (signal.SIGINT, signal.SIGINT):
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                continue
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    home = tmp_path_factory.mktemp("nodes_home")
    job_dir = tmp_path_factory.mktemp("nodes") / "job"
    port = _free_port()
    base = dict(os.environ, GPUSCOPE_HOME=str(home))
    base.pop("PYTHONPATH", None)
    procs, files = [], []
    try:
        for node in (0, 1):
            env = dict(base, **({"GPUSCOPE_TEST_CLOCK_SHIFT_NS": str(SHIFT_NS)} if node else {}))
            if node == 0:   # the flags
                where = ["--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", f"localhost:{port}",
                         "--rdzv-id", "twonodes"]
            else:           # as under srun: no flags, SLURM's variables
                where = []
                env.update(SLURM_JOB_ID="twonodes", SLURM_NNODES="2", SLURM_NODEID="1",
                           SLURM_NODELIST="localhost", MASTER_PORT=str(port))
            argv = [sys.executable, "-m", "gpuscope", "run", "--json", "--launcher", "torchrun", *where,
                    "--rdzv-timeout", "240", "--nproc", str(NPROC), "--job-dir", str(job_dir),
                    "--cwd", str(SCRIPTS), "-m", "modpkg.ddp"]
            out, err = (open(home / f"node{node}.{k}", "w+b") for k in ("out", "err"))
            files.append((out, err))
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=err))
        deadline, failed = time.monotonic() + 420, None
        while any(p.poll() is None for p in procs) and failed is None:
            # a node that failed leaves the other waiting at the rendezvous: stop it at once
            if any(p.returncode for p in procs):
                failed = "a node failed"
            elif time.monotonic() > deadline:
                failed = "the nodes did not finish in 420 s"
            time.sleep(0.5)
    finally:
        for p in procs:    # nothing left running, whatever happened
            if p.poll() is None:
                _stop(p)
    outs = []
    for p, (out, err) in zip(procs, files):
        out.seek(0), err.seek(0)
        outs.append((p.returncode, out.read(), err.read()))
        out.close(), err.close()
    tails = "\n".join(f"node {k} rc={rc}: {err.decode()[-2000:]}" for k, (rc, _, err) in enumerate(outs))
    assert failed is None and all(rc == 0 for rc, _, _ in outs), f"{failed}\n{tails}"
    runs = [summary(subprocess.CompletedProcess([], rc, out, err)) for rc, out, err in outs]
    rep = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--json", str(job_dir)], env=base,
                         capture_output=True, timeout=120)
    assert rep.returncode == 0, rep.stderr.decode()[-3000:]
    text = subprocess.run([sys.executable, "-m", "gpuscope", "report", str(job_dir)], env=base,
                          capture_output=True, timeout=120)
    assert text.returncode == 0, text.stderr.decode()[-3000:]
    import json

    return runs, json.loads(rep.stdout), text.stdout.decode(), job_dir


def test_each_node_copies_its_run_into_the_job_folder(job):
    runs, _, _, job_dir = job
    folders = sorted(p.name for p in job_dir.iterdir() if (p / "node.json").is_file())
    assert [f.split("-")[0] for f in folders] == ["node0", "node1"], folders
    host = socket.gethostname()
    for node, run in enumerate(runs):
        copied = f"node {node} of 2 ({host}): run copied to {job_dir}"
        assert any(n.startswith(copied) for n in run["notes"]), run["notes"]
        ranks = sorted(p["rank"] for p in run["processes"] if p["role"].startswith("rank "))
        assert len(ranks) == NPROC, run["processes"]
    both = sorted(p["rank"] for run in runs for p in run["processes"] if p["rank"] is not None)
    assert both == list(range(2 * NPROC))


def test_merged_report_has_every_rank_with_its_node_and_ranges(job):
    runs, rep, _, _ = job
    procs = [p for p in rep["processes"] if p["rank"] is not None]
    assert sorted(p["rank"] for p in procs) == list(range(2 * NPROC))
    node_of_pid = {p["pid"]: node for node, run in enumerate(runs) for p in run["processes"]}
    for p in procs:
        assert p["node"] == {"host": socket.gethostname(), "node_rank": node_of_pid[p["pid"]]}, p
        assert p["gpuscope_ranges"] == 4, p          # 3 train_step + 1 all_reduce
    assert len({p["timeline_pid"] for p in rep["processes"]}) == len(rep["processes"])
    job = rep["job"]
    assert [n["node_rank"] for n in job["nodes"]] == [0, 1]
    assert sorted(r for n in job["nodes"] for r in n["ranks"]) == list(range(2 * NPROC))
    for r in job["ranks"]:
        assert r["ranges"] == 4 and r["range_names"] == ["all_reduce", "train_step"], r
        assert r["step"]["count"] == 3, r
    assert job["stragglers"]["step"] == "train_step"
    names = {row["name"]: row["count"] for row in rep["nvtx_summary"]}
    assert names == {"train_step": 3 * 2 * NPROC, "all_reduce": 2 * NPROC}


def test_injected_clock_offset_is_recovered_and_ranks_line_up(job):
    _, rep, text, _ = job
    node0, node1 = rep["job"]["nodes"]
    assert node0["clock_offset_ns"] == 0 and node0["clock_reference"] == "self"
    assert node1["clock_error"] is None
    residual = node1["clock_residual_ns"]
    assert 0 < residual < 50_000_000, node1             # a round trip on one host: well under 100 ms
    assert abs(node1["clock_offset_ns"] - SHIFT_NS) <= residual + 1_000_000, node1
    # measured again when node 1's program ended (node 0 served until then): one clock, no drift
    assert node1["clock_drift_ns"] is not None, node1
    assert abs(node1["clock_drift_ns"]) <= residual + node1["clock_end_residual_ns"] + 1_000_000, node1
    # all_reduce ends once every rank joined it: on the merged clock the ranks end it close together,
    # which they would not if node 1's 7 s were left in its times
    ends = [r["last_ns"] for r in rep["job"]["ranks"]]
    assert max(ends) - min(ends) < 2_000_000_000, ends
    # the text shows node 1's measured offset in ms, as the JSON has it
    shown = f"{node1['clock_offset_ns'] / 1e6:,.3f}"
    assert "Clock offset (ms)" in text and shown in text and "Stragglers (train_step)" in text, text


def test_a_node_alone_gives_up_and_still_leaves_its_run(tmp_path):
    """Node 1 without node 0: torchrun gives up after --rdzv-timeout, gpuscope does not wait for a
    clock server that never comes, and the node's run still lands in the job folder, saying why."""
    env = dict(os.environ, GPUSCOPE_HOME=str(tmp_path / "home"))
    env.pop("PYTHONPATH", None)
    job_dir = tmp_path / "job"
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--json", "--launcher", "torchrun",
                           "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", f"localhost:{_free_port()}",
                           "--rdzv-timeout", "5", "--job-dir", str(job_dir), "--cwd", str(SCRIPTS),
                           "-m", "modpkg.ddp"], env=env, capture_output=True, timeout=240)
    assert proc.returncode != 0
    note = next(n for n in summary(proc)["notes"] if n.startswith("node 1 of 2"))
    assert "clock offset not measured (the reference node published no clock server)" in note, note
    rep = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--json", str(job_dir)], env=env,
                         capture_output=True, timeout=120)
    import json

    out = json.loads(rep.stdout)
    assert [n["node_rank"] for n in out["job"]["nodes"]] == [1] and out["job"]["nodes"][0]["exit_code"] != 0
    assert any(n.startswith("node(s) 0 of 2 missing") for n in out["notes"]), out["notes"]
    assert any("node 1: clock offset not measured" in n for n in out["notes"]), out["notes"]
