"""One row per process: a fork child that execs keeps its one row (issue 13), whether it execs
Python (its later log is the row, started at the fork) or another program (named by the program)."""

from __future__ import annotations

import json
from collections import Counter

from gpuscope.views.procroles import RoleReader
from tests.runs.helpers import gpuscope, script, summary


def test_fork_then_exec_keeps_one_row(run_env):
    proc = gpuscope("run", "--json", script("fork_exec.py"), env=run_env, timeout=120)
    result = summary(proc)
    assert proc.stdout.startswith(b"child python 0\nsleep 0\n"), proc.stdout
    rows = result["processes"]
    pids = [p["pid"] for p in rows]
    assert len(pids) == len(set(pids)), rows
    # every row is keyed by its process's start (pid + start ticks), the exec'd one's from before its exec
    assert all(isinstance(p["start_ticks"], int) for p in rows), rows
    child = [p for p in rows if p["info"].get("before_exec") == "fork child"]
    assert len(child) == 1 and child[0]["role"] == "subprocess" and child[0]["exit_code"] == 0, rows
    assert child[0]["info"]["argv"][1:3] == ["-c", "print('child python')"]
    sleep = [p for p in rows if p["info"].get("exec") == "sleep"]
    assert len(sleep) == 1 and sleep[0]["role"] == "not injected", rows
    assert Counter(p["role"] for p in rows) == Counter({"main": 1, "subprocess": 1, "not injected": 1}), rows


def _log(folder, pid, start, role):
    header = {"pid": pid, "ppid": 1, "role": role, "anchor_mono_ns": start, "anchor_wall_ns": start}
    (folder / f"{pid}-{start}.log").write_text("H\t" + json.dumps(header) + "\n")


def test_live_roles_take_the_latest_log_of_a_pid(tmp_path):
    folder = tmp_path / "events"
    folder.mkdir()
    _log(folder, 7, 200, "ray worker")       # after the exec
    reader = RoleReader(tmp_path, reread_s=60.0)   # each file read once: the second lookup reads only the new one
    assert reader.lookup()[7].role == "ray worker"
    _log(folder, 7, 100, "fork child")       # before the exec, seen later: does not win
    assert reader.lookup()[7].role == "ray worker"
