"""DDP rules on real 2-rank torchrun jobs on CPU (gloo), each with a short collective timeout (60 s)
so that nothing can hang the suite, and generous pytest timeouts as safety nets:

- ``rank-not-in-collective``: rank 1 skips a collective (scripts/ddp_skip.py); live, once the run
  looks stuck, both ranks' stacks show where each one waits, and the finding names rank 1;
- ``straggler-rank``: rank 1's ``load_batch`` ranges take 6× rank 0's (scripts/ddp_straggler.py);
- clean: the DDP example of tests/runs (modpkg.ddp: DDP, AdamW, an all_reduce) has no finding.

A rank that *exits* while the others wait does not hang gloo (the peers see the closed
connection and fail at once), so that branch is tested on parsed faulthandler dumps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuscope.findings import ddp_rules
from gpuscope.findings.engine import analyse_run
from gpuscope.findings.stacks import ProcessStacks, parse_dump
from tests import requires
from tests.findings.cli import call_json
from tests.findings.live import SCRIPTS, run_live
from tests.runs.helpers import SCRIPTS as RUN_SCRIPTS, gpuscope, pid_alive, summary

requires.torch()
pytestmark = [pytest.mark.torch, pytest.mark.timeout(600)]


def _env(tmp_path) -> dict:
    env = dict(os.environ, GPUSCOPE_HOME=str(tmp_path / "home"))
    env.pop("PYTHONPATH", None)
    return env


def test_skipped_collective_both_stacks_and_the_finding_names_the_rank(capsys):
    def take_stacks(run):                      # while it hangs: the command as a user runs it
        return call_json(capsys, "stacks", run.run_id, "--timeout", "20")

    live = run_live(SCRIPTS / "ddp_skip.py", launcher="torchrun", nproc=2, stuck_after_s=5, timeout_s=240,
                    until=lambda found: any(f.code == "rank-not-in-collective" for f in found), during=take_stacks)
    codes = [f.code for f in live.findings]
    assert "no-progress" in codes and "rank-not-in-collective" in codes, codes
    f = next(f for f in live.findings if f.code == "rank-not-in-collective")
    by_role = {p.role: p.pid for p in live.result.processes}
    assert f.pids == (by_role["rank 1"],) and f.severity == "error"
    assert f.title.startswith("rank 1 is elsewhere (elsewhere (ddp_skip.py:16)) while rank 0 waits in all_reduce "
                              "(called from main (ddp_skip.py:28))"), f.title
    assert f.evidence.excerpts == (
        f"rank 0 (pid {by_role['rank 0']}) waits in all_reduce called from main (ddp_skip.py:28)",
        f"rank 1 (pid {by_role['rank 1']}) is elsewhere: elsewhere (ddp_skip.py:16)")
    # gpuscope stacks, taken while it hung: each rank's own place
    procs = {p["role"]: p for p in live.during["processes"]}
    top0 = procs["rank 0"]["threads"][0]["frames"]
    top1 = procs["rank 1"]["threads"][0]["frames"]
    assert top0[0]["function"] == "all_reduce" and top0[0]["file"].endswith("distributed_c10d.py")
    assert any((fr["function"], fr["line"]) == ("main", 28) for fr in top0)
    assert (top1[0]["function"], Path(top1[0]["file"]).name, top1[0]["line"]) == ("elsewhere", "ddp_skip.py", 16)
    assert live.result.status == "stopped"
    assert not [p for p in live.result.processes if p.pid and pid_alive(p.pid)]
    after = call_json(capsys, "findings", live.run_id)
    assert "rank-not-in-collective" in {x["code"] for x in after["findings"]}


def test_straggler_rank_named(tmp_path):
    proc = gpuscope("run", "--json", "-q", "--launcher", "torchrun", "--nproc", "2",
                    str(SCRIPTS / "ddp_straggler.py"), env=_env(tmp_path), timeout=500)
    data = summary(proc)
    assert data["status"] == "exited", proc.stderr.decode()[-2000:]
    found = {f.code: f for f in analyse_run(Path(data["run_dir"]))}
    f = found["straggler-rank"]
    rank1 = next(p["pid"] for p in data["processes"] if p["role"] == "rank 1")
    assert f.pids == (rank1,) and "'load_batch'" in f.title and f.evidence.number("slow rank") == 1
    assert f.evidence.number("ratio") > 3
    # the ranges that hold the all_reduce are long on rank 0 (it waits there): not the straggler
    assert "'sync'" not in f.title
    assert set(found) == {"straggler-rank"}


def test_ddp_example_is_clean(tmp_path):
    proc = gpuscope("run", "--json", "-q", "--launcher", "torchrun", "--nproc", "2", "--cwd", str(RUN_SCRIPTS),
                    "-m", "modpkg.ddp", env=_env(tmp_path), timeout=500)
    data = summary(proc)
    assert data["status"] == "exited", proc.stderr.decode()[-2000:]
    found = analyse_run(Path(data["run_dir"]))
    assert found == [], [f.line() for f in found]


DUMP_WAITING = """Current thread 0x00007f0000000001 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/job/train.py", line 40 in main
  File "/job/train.py", line 50 in <module>
"""
DUMP_BACKWARD = """Current thread 0x00007f0000000001 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 829 in _engine_run_backward
  File "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 364 in backward
  File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 625 in backward
  File "/job/train.py", line 33 in step
"""


def _proc(pid: int, role: str, dump: str) -> ProcessStacks:
    return ProcessStacks(pid, role, parse_dump(dump, {0x7F0000000001: "MainThread"}))


def test_a_rank_that_exited_while_the_others_wait_is_named():
    procs = [_proc(11, "rank 0", DUMP_WAITING), _proc(12, "rank 1", DUMP_BACKWARD)]
    [f] = ddp_rules.collective_mismatch(procs, {2: (13, 0)})
    assert f.pids == (13,) and f.title.startswith("rank 2 has exited (code 0) while ranks 0, 1 wait in all_reduce")
    assert "find_unused_parameters=True" in f.fix                  # a rank waits in backward
    assert "rank 1 (pid 12) waits in backward (DDP's gradient all-reduce) called from step (train.py:33)" \
        in f.evidence.excerpts


def test_ranks_all_in_a_collective_or_none_in_one_are_no_finding():
    assert ddp_rules.collective_mismatch([_proc(11, "rank 0", DUMP_WAITING), _proc(12, "rank 1", DUMP_WAITING)]) == []
    elsewhere = DUMP_WAITING.replace("distributed_c10d.py", "elsewhere.py").replace("/torch/", "/mylib/")
    assert ddp_rules.collective_mismatch([_proc(11, "rank 0", elsewhere), _proc(12, "rank 1", elsewhere)]) == []
