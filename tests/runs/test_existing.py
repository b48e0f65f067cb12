"""The processes that existed before a run's program are not read again by the run's scans
(gpuscope/procs/existing.py): the same members are found, by reading only the pids that came after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gpuscope.procs import existing as proclist_existing
from gpuscope.procs import files as proclist
from gpuscope.procs import read as processes
from gpuscope.procs.membership import run_processes
from gpuscope.telemetry.tree import ProcessTree

# A root in its own session with a child, and a grandchild that leaves the session (setsid) but
# carries the run id: members by session and by the run id. Each writes its pid, then sleeps.
TREE = """
import os, sys, time
out = sys.argv[1]
def note(): open(os.path.join(out, str(os.getpid())), "w").close()
note()
if os.fork() == 0:
    note()
    if os.fork() == 0:
        os.setsid()
        note()
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


@pytest.fixture
def run_tree(tmp_path):
    run_id = f"existing-{os.getpid()}"
    existing = proclist_existing.Existing()
    root = subprocess.Popen([sys.executable, "-c", TREE, str(tmp_path)], start_new_session=True,
                            env={**os.environ, "GPUSCOPE_RUN_ID": run_id})
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = {int(p.name) for p in tmp_path.iterdir()}
    assert len(pids) == 3 and root.pid in pids
    yield root.pid, run_id, existing, pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    root.wait()


def test_the_run_is_found_the_same_reading_only_the_new_pids(run_tree, monkeypatch):
    root, run_id, existing, pids = run_tree
    assert existing.skippable() == existing.pids and str(root) not in existing.pids
    full = run_processes(root, run_id)
    reads: list[int] = []
    real = processes.read
    monkeypatch.setattr(processes, "read", lambda pid: reads.append(pid) or real(pid))
    quick = run_processes(root, run_id, existing=existing)
    assert set(quick) == set(full) == pids            # the escaped grandchild too (by the run id)
    new = proclist.list_pids() - existing.pids
    assert len(reads) <= len(new) + 2 and len(existing.pids) > 10   # + the root read twice
    assert not any(str(pid) in existing.pids for pid in reads if pid != root)


def test_the_sampler_first_tick_finds_the_same_processes(run_tree):
    root, run_id, existing, pids = run_tree
    seen = []
    for given in (None, existing):
        tree = ProcessTree(root, run_id=run_id, existing=given)
        try:
            started, _ = tree.update(time.monotonic_ns())
            seen.append({p.pid for p in started})
        finally:
            tree.close()
    assert seen[0] == seen[1] == pids


def test_nothing_is_skipped_once_a_pid_may_have_been_reused():
    existing = proclist_existing.Existing()
    assert existing.skippable()
    existing._forks -= proclist.pid_max() // 2     # as after half of pid_max processes created since
    assert existing.skippable() == frozenset()
    existing._forks = None                          # the counter could not be read
    assert existing.skippable() == frozenset()


def test_the_fork_counter_counts_processes_created():
    before = proclist.forks_since_boot()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = proclist.forks_since_boot()
    assert before is not None and after is not None and after > before
    assert proclist.pid_max() >= 301
