"""Rules that read the program's output, each on a real run that prints the real message: a killed
ProcessPoolExecutor worker, torchrun's `exitcode : -9` block, the resource tracker's leaked
semaphore warning (and a run that prints none of them gets none of these findings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import requires
from tests.runs.helpers import gpuscope, summary

EXECUTOR_KILLED = """
import os, signal
from concurrent.futures import ProcessPoolExecutor

def die(_):
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    with ProcessPoolExecutor(1) as ex:
        ex.submit(die, 0).result()
"""
EXECUTOR_FINE = EXECUTOR_KILLED.replace("os.kill(os.getpid(), signal.SIGKILL)", "return 1")
LEAKED_SEMAPHORE = """
import multiprocessing as mp, os

if __name__ == "__main__":
    lock = mp.get_context("spawn").Lock()   # a named semaphore, registered with the resource tracker
    lock.acquire()
    os._exit(0)                              # nothing unlinks it: the tracker does, and says so
"""
RANK_KILLED = """
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
"""


def _run(run_env, tmp_path, text, *options, timeout=180):
    path = tmp_path / "prog.py"
    path.write_text(text)
    result = summary(gpuscope("run", "--json", *options, str(path), env=run_env, timeout=timeout))
    found: dict[str, list[dict]] = {}
    for f in result["findings"]:
        found.setdefault(f["code"], []).append(f)
    return result, found


def test_a_killed_executor_worker(run_env, tmp_path):
    result, found = _run(run_env, tmp_path, EXECUTOR_KILLED)
    assert result["exit_code"] == 1, result
    (f,) = [f for f in found["died-by-signal"] if "ProcessPoolExecutor worker was terminated abruptly" in f["title"]]
    assert any("BrokenProcessPool: A process in the process pool was terminated abruptly" in line
               for line in f["evidence"]["excerpts"]), f["evidence"]
    result, found = _run(run_env, tmp_path, EXECUTOR_FINE)
    assert result["exit_code"] == 0 and "died-by-signal" not in found, found


def test_the_resource_trackers_leaked_semaphore_warning(run_env, tmp_path):
    result, found = _run(run_env, tmp_path, LEAKED_SEMAPHORE)
    assert result["exit_code"] == 0, result
    (f,) = found["leaked-semaphore"]
    assert f["title"].startswith("1 semaphore object(s) were never unlinked"), f
    assert any("leaked semaphore objects" in line for line in f["evidence"]["excerpts"]), f["evidence"]


@pytest.mark.torch
def test_torchruns_exitcode_block_names_the_killed_rank(run_env, tmp_path):
    requires.torch()
    result, found = _run(run_env, tmp_path, RANK_KILLED, "--launcher", "torchrun", "--nproc", "1", timeout=580)
    assert result["status"] == "failed", result
    (rank,) = [p for p in result["processes"] if p["role"] == "rank 0"]
    # the rank is torchrun's subprocess, not multiprocessing's: torchrun's block is what says how it ended
    stderr = (Path(result["run_dir"]) / "stderr.log").read_text(errors="replace")
    assert f"exitcode  : -9 (pid: {rank['pid']})" in stderr and rank.get("exit_signal") is None, rank
    assert [f for f in found["died-by-signal"] if "SIGKILL" in f["title"] and rank["pid"] in f["pids"]], found
