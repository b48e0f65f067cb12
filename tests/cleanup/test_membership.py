"""The one membership rule (gpuscope.procs.membership.RunScope) on real processes: why each process
belongs to a run, as the supervisor, the sampler and cleanup all see it.

The run's root leads its own session and carries GPUSCOPE_RUN_ID; under the test's subreaper
(so orphans are reaped, never left to PID 1) it starts a direct child, a double-forked orphan
that stays in its session, and a setsid double fork that escapes the session. Beside it run
unrelated processes: one with another run's id, one without any.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid

import psutil

from gpuscope.procs import read as processes
from gpuscope.procs.membership import Reason, RunScope, run_members, run_processes
from gpuscope.telemetry.tree import ProcessTree
from tests.cleanup.util import state_of, wait_for

ROOT = r"""
import json, os, sys, time
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]

def double_fork(setsid):
    r, w = os.pipe()
    if os.fork() == 0:
        if setsid:
            os.setsid()
        pid = os.fork()
        if pid == 0:
            os.execv(sys.executable, SLEEP)
        os.write(w, str(pid).encode())
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 64))
    os.wait()
    return pid

child = os.fork()
if child == 0:
    os.execv(sys.executable, SLEEP)
out = {"root": os.getpid(), "child": child, "orphan": double_fork(False), "escapee": double_fork(True)}
with open(sys.argv[1] + ".tmp", "w") as fh:
    json.dump(out, fh)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def _start_run(reaper, tmp_path, run_id: str) -> dict:
    out = tmp_path / "pids.json"
    reaper("spawn", argv=["env", f"GPUSCOPE_RUN_ID={run_id}", sys.executable, "-c", ROOT, str(out)],
           setsid=True)
    assert wait_for(out.exists, timeout=60), "the run's root did not start"
    pids = json.loads(out.read_text())
    assert wait_for(lambda: all(b"time.sleep(600)" in open(f"/proc/{pids[k]}/cmdline", "rb").read()
                                for k in ("child", "orphan", "escapee")), timeout=60)
    return pids


def _stat(pid: int) -> processes.ProcInfo:
    info = processes.read(pid)
    assert info is not None, pid
    return info


def test_each_process_belongs_for_its_reason(reaper, tmp_path):
    run_id = "membership-" + uuid.uuid4().hex[:8]
    p = _start_run(reaper, tmp_path, run_id)
    other = reaper("sleeper", env={"GPUSCOPE_RUN_ID": "another-run"})["pid"]
    plain = reaper("sleeper", env={})["pid"]
    root = _stat(p["root"])
    assert root.sid == root.pid                                   # the root leads its session
    assert _stat(p["orphan"]).ppid == reaper.pid and _stat(p["orphan"]).sid == root.sid
    assert _stat(p["escapee"]).sid != root.sid                    # left the session

    members = run_members(RunScope.of(root.pid, run_id))
    why = {pid: reason for pid, (_, reason) in members.items()}
    assert why == {p["root"]: Reason.ROOT, p["child"]: Reason.PARENT, p["orphan"]: Reason.SESSION,
                   p["escapee"]: Reason.ENV}
    assert other not in why and plain not in why
    # the supervisor's view is the same set
    assert set(run_processes(root.pid, run_id)) == set(why)
    # without the run id, the setsid escapee cannot be told from any other process
    assert set(run_members(RunScope.of(root.pid))) == set(why) - {p["escapee"]}
    # the sampler's tree applies the same rule
    tree = ProcessTree(root.pid, run_id=run_id)
    try:
        tree.update(time.monotonic_ns())
        summary = tree.summary(gpu=False)
        assert {pid: summary[pid]["via"] for pid in why} == {pid: r.value for pid, r in why.items()}
        assert summary[p["escapee"]]["escaped"] == "new session"
    finally:
        tree.close()


def test_after_the_root_is_gone_its_session_and_tag_still_tell(reaper, tmp_path):
    run_id = "membership-" + uuid.uuid4().hex[:8]
    p = _start_run(reaper, tmp_path, run_id)
    os.kill(p["root"], signal.SIGKILL)
    assert wait_for(lambda: state_of(p["root"]) is None)          # reaped by the subreaper
    assert not processes.alive(p["root"])
    members = run_members(RunScope.of(p["root"], run_id))
    assert {pid: r for pid, (_, r) in members.items()} == {
        p["orphan"]: Reason.SESSION, p["escapee"]: Reason.ENV,
        p["child"]: Reason.SESSION}                                # re-parented, still in the session


def test_zombies_are_not_alive_and_stat_fields_are_read():
    child = os.fork()
    if child == 0:
        os._exit(3)
    try:
        assert wait_for(lambda: state_of(child) == "Z")
        z = _stat(child)
        assert z.is_zombie and z.status == "zombie" and not processes.alive(child)
        assert z.ppid == os.getpid() and z.comm == processes.read(os.getpid()).comm
    finally:
        os.waitpid(child, 0)
    me = _stat(os.getpid())
    assert processes.alive(os.getpid()) and me.threads >= 1 and me.rss > 1 << 20
    assert me.cmdline[0] == sys.executable or os.path.samefile(me.cmdline[0], sys.executable)
    assert abs(me.create_time - psutil.Process().create_time()) < 0.01     # as psutil computes it
    assert me.environ.get("PATH") == os.environ.get("PATH")
    assert me.uid == os.getuid() and processes.read(child) is None


def test_stat_parser_takes_names_with_spaces_and_parentheses():
    text = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 10 0 0 0 7 5 0 0 20 0 3 0 123456 0 99 " \
           b"18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
    info = processes.parse_stat(4242, text)
    assert info == processes.ProcInfo(pid=4242, ppid=1, pgid=4242, sid=4242, state="S", comm="a) b (c)",
                                      cpu_ticks=12, threads=3, start_ticks=123456, rss_pages=99,
                                      flags=4194560)
    assert not info.is_kernel_thread
    kthreadd = [p for p in processes.snapshot().values() if p.comm == "kthreadd"]
    assert all(k.is_kernel_thread for k in kthreadd) and not processes.read(os.getpid()).is_kernel_thread
    assert processes.parse_stat(1, b"garbage") is None
