"""Kill-safety for whoever runs gpuscope: what a non-root user gets, pid <= 0, kernel threads.

The suite usually runs as root. The user-facing rules are then checked for real from an
unprivileged process: a child started as uid 65534 (``setpriv``) calls the safety API on a
process and a /dev/shm segment of root's, on PID 1, on pids 0 and -1, on a kernel thread, and on
its own process, and prints what it got as JSON. A suite run as a normal user runs the same
child as itself, against another user's process where one exists.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from multiprocessing import shared_memory
from pathlib import Path

import pytest

from gpuscope.cleanup import Policy, ProcIdentity, identify, stop_process
from gpuscope.procs.read import ancestors, snapshot
from tests.cleanup.util import state_of, wait_for

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

CHILD = r'''
import json, os, subprocess, sys, time
from gpuscope.cleanup import Policy, ProcIdentity, identify, stop_process
from gpuscope.cleanup.safety import listing_refusal
from gpuscope.cleanup.shm_actions import identify_segment, unlink_segment
from gpuscope.cleanup.snapshot import read_process

other, seg, kthread = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
allow = Policy(allow_other_users=True)
out = {"euid": os.geteuid()}
if other > 0:
    out["other"] = stop_process(identify(other), Policy()).message
    out["other_allowed"] = stop_process(identify(other), allow).message
    out["listing"] = listing_refusal(read_process(other), allow)
if seg:
    out["shm"] = unlink_segment(identify_segment(seg), allow).message
if kthread > 0:
    out["kthread"] = stop_process(identify(kthread), allow).message
out["pid1"] = stop_process(identify(1) or ProcIdentity(1, 0.0), allow).message
out["zero"] = stop_process(ProcIdentity(0, 0.0), allow).message
out["minus1"] = stop_process(ProcIdentity(-1, 0.0), allow).message
mine = subprocess.Popen(["sleep", "600"])
time.sleep(0.2)
res = stop_process(identify(mine.pid), Policy(grace_s=2))
mine.wait()
out["mine"] = [res.result, res.final_state, mine.returncode]
print(json.dumps(out))
'''


def _python_for(uid: int, wrap: tuple[str, ...] = ()) -> str:
    """An interpreter ``uid`` may run under ``wrap`` (the suite's may live under a private home)."""
    for cand in (sys.executable, shutil.which("python3") or "", "/usr/bin/python3"):
        if cand and _runs_as(uid, [*wrap, cand, "-c", "import sqlite3"]):
            return cand
    pytest.skip(f"no python that uid {uid} may run")


def _runs_as(uid: int, argv: list[str]) -> bool:
    res = subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", *argv],
                         capture_output=True, timeout=60)
    return res.returncode == 0


def _child(argv: list[str], tmp_path: Path, uid: int | None) -> dict:
    home = tmp_path / "home"
    home.mkdir(mode=0o777, exist_ok=True)
    home.chmod(0o777)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
           "GPUSCOPE_HOME": str(home), "HOME": str(home)}
    prefix = [] if uid is None else ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups"]
    python = sys.executable if uid is None else _python_for(uid)
    res = subprocess.run([*prefix, python, "-c", CHILD, *argv], env=env, capture_output=True, text=True,
                         timeout=120, cwd=str(home))
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def _kernel_thread() -> int:
    return next((p.pid for p in snapshot().values() if p.is_kernel_thread), 0)


@pytest.fixture
def root_owned(tmp_path):
    """A sleeping process and a /dev/shm segment of the suite's user (root here)."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    seg = shared_memory.SharedMemory(create=True, size=4096)
    try:
        assert wait_for(lambda: state_of(proc.pid) == "S")
        yield proc, seg.name
    finally:
        proc.kill()
        proc.wait(timeout=10)
        seg.close()
        seg.unlink()


def _expect_non_root(out: dict, other: int, seg: str, owner: str) -> None:
    assert out["euid"] != 0
    refusal = f"refusing: pid {other} belongs to user {owner}; run as root and pass --allow-other-users"
    assert out["other"] == refusal
    assert out["other_allowed"] == refusal            # --allow-other-users is root's alone
    assert out["listing"] == refusal
    if seg:
        assert out["shm"].startswith(f"refusing: /dev/shm/{seg} belongs to user {owner}")
    assert out["pid1"] == "refusing to signal PID 1"
    assert out["zero"] == "refusing: 0 is not a process id"
    assert out["minus1"] == "refusing: -1 is not a process id"
    # its own process: SIGTERM did it (a zombie until the child's own wait, which then sees -15)
    assert out["mine"][0] == "done" and out["mine"][2] == -15


def test_a_non_root_user_may_act_on_its_own_processes_only(root_owned, tmp_path):
    """As root: the child runs as uid 65534 against root's process and segment. As a normal
    user: the child runs as that user against another user's process."""
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.fail("util-linux `setpriv` is needed to run the check as another user")
        proc, seg = root_owned
        kthread = _kernel_thread()
        out = _child([str(proc.pid), seg, str(kthread)], tmp_path, NOBODY)
        _expect_non_root(out, proc.pid, seg, "root")
        if kthread:
            assert out["kthread"] == f"refusing: pid {kthread} is a kernel thread"
        assert proc.poll() is None and Path("/dev/shm", seg).exists()   # nothing of root's was touched
        return
    me = os.geteuid()
    mine = set(ancestors(os.getpid())) | {1, os.getpid()}
    other = next((p for p in snapshot().values() if p.uid not in (me, None) and p.pid not in mine
                  and not p.is_kernel_thread and not p.is_zombie), None)
    if other is None:
        pytest.skip("no process of another user to be refused")
    out = _child([str(other.pid), "", "0"], tmp_path, None)
    _expect_non_root(out, other.pid, "", pwd.getpwuid(other.uid or 0).pw_name)


def test_pids_zero_and_below_are_refused_before_any_signal():
    for pid in (0, -1, -2):
        res = stop_process(ProcIdentity(pid, 0.0), Policy(allow_other_users=True))
        assert res.result == "refused" and res.message == f"refusing: {pid} is not a process id"


def test_kernel_threads_are_refused():
    kthread = _kernel_thread()
    if not kthread:
        pytest.skip("no kernel thread visible in this PID namespace")
    res = stop_process(identify(kthread), Policy(allow_other_users=True))
    assert res.result == "refused" and res.message == f"refusing: pid {kthread} is a kernel thread"


def test_a_pid_1_zombie_is_advice_for_a_non_root_user_too(tmp_path):
    """The PID-1 zombie of tests/cleanup/test_detect.py, made by a non-root user: its PID
    namespace sits in a user namespace of its own (``unshare --user --map-root-user``)."""
    from tests.cleanup.test_detect import PID1_ZOMBIE

    if not shutil.which("unshare") or (os.geteuid() == 0 and not shutil.which("setpriv")):
        pytest.fail("util-linux `unshare` and `setpriv` are needed")
    home = tmp_path / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
           "GPUSCOPE_HOME": str(home), "HOME": str(home)}
    as_user = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"] \
        if os.geteuid() == 0 else []
    userns = ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc")
    python = _python_for(NOBODY, userns) if as_user else sys.executable
    res = subprocess.run([*as_user, *userns, python, "-c", PID1_ZOMBIE], env=env, capture_output=True,
                         text=True, timeout=120, cwd=str(home))
    if res.returncode != 0 and "Operation not permitted" in res.stderr:
        pytest.skip(f"unprivileged user namespaces are off here: {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["me"] == 1 and out["suspect"]["evidence"]["ppid"] == 1
    assert out["act"]["result"] == "advice" and "--init" in out["act"]["message"]


def test_the_cli_refuses_pid_zero_and_below_and_paths_as_names(run_env):
    from tests.cleanup.util import cli_json

    rc, out = cli_json(run_env, "--no-gpu", "--kill", "0", "-1", "--unlink", "../etc/passwd", "--yes")
    assert rc == 1
    assert [(r["result"], r["message"]) for r in out["results"]] == [
        ("refused", "refusing: 0 is not a process id"), ("refused", "refusing: -1 is not a process id"),
        ("refused", "refusing: '../etc/passwd' is not a shared memory segment name")]
