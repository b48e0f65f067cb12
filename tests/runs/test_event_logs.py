"""Event logs: readable after SIGKILL, aligned clocks, tolerant reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gpuscope.trace.events import read_log, read_run_events
from tests.runs.helpers import gpuscope, summary

KILLED = """
import os, signal, time, nvtx
deadline = time.monotonic() + 0.6
n = 0
while time.monotonic() < deadline:
    with nvtx.annotate("busy"):
        n += 1
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_leaves_readable_prefix(run_env, tmp_path):
    path = tmp_path / "killed.py"
    path.write_text(KILLED)
    proc = gpuscope("run", "--json", str(path), env=run_env)
    result = summary(proc)
    assert result["signal"] == "SIGKILL"
    (main,) = [p for p in result["processes"] if p["role"] == "main"]
    assert main["ranges"] > 100  # flushed at least every 100 ms before the kill
    assert main["clean_exit"] is False
    (pe,) = read_run_events(result["run_dir"])
    r = pe.ranges
    assert np.all(r["t1"] >= r["t0"]) and np.all(np.diff(r["t0"]) >= 0)


def test_truncated_and_damaged_lines_are_tolerated(tmp_path):
    log = tmp_path / "1-5.log"
    log.write_bytes(
        b'H\t{"pid": 1, "ppid": 0, "anchor_mono_ns": 1000, "anchor_wall_ns": 5000, "role": "main"}\n'
        b"S\t0\tnvtx\t\tstep\t#ff0000\n"
        b"R\t1100\t1200\t7\t0\tP\n"
        b"R\tgarbage\n"
        b"M\t1300\t7\t0\n"
        b"R\t1400\t15"  # cut mid-line by SIGKILL
    )
    pe = read_log(log)
    assert pe is not None and pe.truncated
    assert len(pe.ranges) == 1 and pe.label(0) == "step"
    assert pe.wall_ns(1100) == 5100
    assert pe.marks == [(1300, 7, 0)]


def test_not_a_log(tmp_path):
    (tmp_path / "x.log").write_text("hello\n")
    assert read_log(tmp_path / "x.log") is None
    assert read_run_events(Path(tmp_path) / "missing") == []


def test_clocks_align_across_processes(run_env):
    from tests.runs.helpers import script

    proc = gpuscope("run", "--json", "--start-method", "spawn", script("pool_nvtx.py"), env=run_env)
    result = summary(proc)
    logs = read_run_events(result["run_dir"])
    main = next(pe for pe in logs if pe.role == "main")
    workers = [pe for pe in logs if pe.role == "pool worker"]
    # pool_nvtx.py holds both workers in a task at once (a barrier): each ran one
    assert len(workers) == 2 and all(len(pe.ranges) for pe in workers), [(pe.pid, pe.role) for pe in logs]
    for pe in workers:
        # a worker starts after the parent, and its task after that, on the same monotonic clock
        assert main.start_ns < pe.start_ns < pe.ranges["t0"].min()
        # the wall-clock anchors agree: each process reads both clocks at once, so the offsets differ
        # by the moments between two reads (a bound about agreement, far above a loaded machine's pauses)
        skew = (pe.wall_ns(pe.start_ns) - pe.start_ns) - (main.wall_ns(main.start_ns) - main.start_ns)
        assert abs(skew) < 500_000_000, skew
        assert pe.wall_ns(pe.start_ns) > main.wall_ns(main.start_ns) - abs(skew)


def _log(folder: Path, pid: int, ppid: int, role: str, start: int, lines: str = "") -> None:
    head = {"pid": pid, "ppid": ppid, "anchor_mono_ns": start, "anchor_wall_ns": start, "role": role}
    (folder / f"{pid}-{start}.log").write_text("H\t" + json.dumps(head) + "\n" + lines)


def test_a_child_that_never_learnt_its_role_gets_the_one_its_starter_recorded(tmp_path):
    """A pool worker that Pool.terminate() ends while it starts, before it reads its Process object,
    stays a "spawn child" in its own log; the C line of the process that called start() says what
    it was. A C line without a role (an older log), a pid reused after that start, and a child that
    learnt its role itself are left alone."""
    events = tmp_path / "events"
    events.mkdir()
    _log(events, 100, 1, "main", 1000, "C\t1100\t1200\t101\tpool worker\nC\t1300\t1400\t102\tpool worker\n"
                                       "C\t1500\t1600\t103\n")
    _log(events, 101, 100, "spawn child", 1250)                                     # ended before its bootstrap
    _log(events, 102, 100, "spawn child", 1450, 'I\t1460\t{"role": "executor worker"}\n')   # learnt its own
    _log(events, 103, 100, "spawn child", 1650)                                     # an older log: no role
    _log(events, 104, 1, "fork child", 900)                                         # no C line names it
    roles = {pe.pid: pe.role for pe in read_run_events(tmp_path)}
    assert roles == {100: "main", 101: "pool worker", 102: "executor worker", 103: "spawn child", 104: "fork child"}
    _log(events, 101, 1, "spawn child", 1050)     # the pid again, before that start() call: another process
    roles = {(pe.pid, pe.start_ns): pe.role for pe in read_run_events(tmp_path)}
    assert roles[(101, 1050)] == "spawn child" and roles[(101, 1250)] == "pool worker"


def test_the_starter_records_each_childs_role(run_env):
    """Process.start() writes the child's role (from its target) on its C line, in every start method."""
    from tests.runs.helpers import script

    for method in ("spawn", "fork", "forkserver"):
        result = summary(gpuscope("run", "--json", "--start-method", method, script("pool_nvtx.py"), env=run_env))
        logs = read_run_events(result["run_dir"])
        told = {pid: role for pe in logs for _, _, pid, role in pe.children}
        workers = [pe.pid for pe in logs if pe.role == "pool worker"]
        assert workers and all(told.get(pid) == "pool worker" for pid in workers), (method, told, workers)
