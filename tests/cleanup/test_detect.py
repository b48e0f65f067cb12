"""Detection with real processes and real /dev/shm: orphaned multiprocessing workers, run
leftovers matched through the run table, shared memory that is in use, zombies whose parent
will not reap."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import sys
import time
import uuid
from multiprocessing import shared_memory

import psutil
import pytest

from gpuscope.procs import read as processes
from gpuscope.cleanup import Policy, Scanner, act, identify, perform
from gpuscope.cleanup import model as m
from gpuscope.store import runs
from gpuscope.trace.process_row import ProcessRow
from tests.cleanup.conftest import HELPERS
from tests.cleanup.util import PREFIX, make_finished_run, state_of, wait_for, wait_quiet


def _scan(conn=None, **kw):
    return Scanner(conn=conn, use_gpu=False, shm_min_age_s=0, **kw).scan()


def test_orphaned_spawn_child_and_resource_tracker(reaper):
    child = reaper("orphan_mp", script=str(HELPERS / "mp_orphan.py"))["pid"]
    assert wait_for(lambda: psutil.Process(child).ppid() == reaper.pid)
    result = _scan()
    s = result.by_pid(child)
    assert s is not None and s.codes == [m.ORPHAN_WORKER]
    assert "orphaned multiprocessing spawn child" in s.reasons[0].text
    assert f"adopted by pid {reaper.pid}" in s.reasons[0].text
    trackers = [x for x in result.suspects if x.evidence.get("ppid") == reaper.pid
                and "resource tracker" in " ".join(r.text for r in x.reasons)]
    assert trackers, [x.title for x in result.suspects]
    tracker = trackers[0].pid
    res = perform(s, policy=Policy(grace_s=2))
    assert res.ok and res.final_state == "gone", res
    # the tracker exits by itself once the last process sharing its pipe is gone
    assert wait_for(lambda: state_of(tracker) is None, timeout=10)


def test_orphaned_forkserver_and_its_worker(reaper):
    worker = reaper("orphan_mp", script=str(HELPERS / "fs_orphan.py"))["pid"]
    server = psutil.Process(worker).ppid()
    assert wait_for(lambda: psutil.Process(server).ppid() == reaper.pid)
    result = _scan()
    s = result.by_pid(server)
    assert s is not None and s.codes == [m.ORPHAN_WORKER]
    assert "orphaned multiprocessing forkserver" in s.reasons[0].text
    w = result.by_pid(worker)
    assert w is not None and f"its forkserver (pid {server}) is orphaned" in w.reasons[0].text


SET_NAME = ("import ctypes, time; ctypes.CDLL(None).prctl(15, b'pt_data_worker', 0, 0, 0); "
            "time.sleep(600)")


def test_orphaned_dataloader_worker_and_torchrun_worker(reaper):
    loader = reaper("sleeper", env={}, code=SET_NAME)["pid"]   # torch names its workers so
    worker = reaper("sleeper", env={"TORCHELASTIC_RUN_ID": "none", "LOCAL_RANK": "1"})["pid"]
    assert wait_for(lambda: psutil.Process(loader).name() == "pt_data_worker")
    result = _scan()
    assert "orphaned PyTorch DataLoader worker" in result.by_pid(loader).reasons[0].text
    assert "orphaned torchrun worker" in result.by_pid(worker).reasons[0].text


def _children_of_sh(top: int) -> list:
    out = []
    for p in psutil.Process(top).children(recursive=True):
        try:
            if "time.sleep(600)" in " ".join(p.cmdline()) and p.parent().name() == "sh":
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_worker_behind_a_shell_wrapper_of_a_live_launcher_is_not_an_orphan(reaper):
    inner = f"TORCHELASTIC_RUN_ID=x LOCAL_RANK=0 {sys.executable} -c 'import time; time.sleep(600)'; true"
    launcher = f"import subprocess; subprocess.run(['sh', '-c', {inner!r}])"
    top = reaper("spawn", argv=[sys.executable, "-c", launcher], setsid=True)["pid"]
    worker = wait_for(lambda: _children_of_sh(top))
    assert worker
    assert _scan().by_pid(worker[0].pid) is None


def test_spawn_child_of_a_live_parent_is_not_an_orphan(reaper):
    parent = reaper("spawn", argv=[sys.executable, str(HELPERS / "mp_orphan.py"), "stay"],
                    setsid=True)["pid"]
    kids = wait_for(lambda: [c.pid for c in psutil.Process(parent).children()
                             if "--multiprocessing-fork" in c.cmdline()])
    assert kids
    result = _scan()
    assert result.by_pid(kids[0]) is None and result.by_pid(parent) is None


def test_run_leftover_matched_by_run_table(reaper, store):
    run_id = make_finished_run(store, status="exited")
    pid = reaper("sleeper", env={})["pid"]
    ct = psutil.Process(pid).create_time()
    runs.replace_processes(store, run_id, [
        ProcessRow(pid=pid, ppid=1, role="pool worker", info={"create_time": ct})])
    s = _scan(store).by_pid(pid)
    assert s is not None and s.codes == [m.RUN_LEFTOVER]
    assert "run table (pid + create time)" in s.reasons[0].text and "role in that run: pool worker" in s.reasons[0].text
    assert s.evidence["run_id"] == run_id and s.evidence["run_status"] == "exited"


def test_same_pid_with_other_create_time_is_not_a_leftover(reaper, store):
    run_id = make_finished_run(store)
    pid = reaper("sleeper", env={})["pid"]
    ct = psutil.Process(pid).create_time()
    runs.replace_processes(store, run_id, [ProcessRow(pid=pid, info={"create_time": ct - 30})])
    assert _scan(store).by_pid(pid) is None


def test_process_of_a_running_run_is_not_a_leftover(reaper, store):
    from gpuscope.store import runs as r

    run_id = "cleanuptest-running-" + uuid.uuid4().hex[:6]
    r.insert_run(store, run_id=run_id, spec={"script": "x.py", "launcher": "python",
                                             "start_method": "spawn"}, run_dir="/x", versions={})
    pid = reaper("sleeper", env={"GPUSCOPE_RUN_ID": run_id})["pid"]
    assert _scan(store).by_pid(pid) is None


def test_segments_in_use_are_not_listed(leaked_shm):
    mapped = shared_memory.SharedMemory(name=PREFIX + uuid.uuid4().hex[:10], create=True, size=4096)
    held = PREFIX + uuid.uuid4().hex[:10]
    fd = os.open(f"/dev/shm/{held}", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, 4096)
        names = {s.identity.name for s in _scan().suspects if s.kind == m.KIND_SHM}
        assert leaked_shm in names
        assert mapped.name not in names          # mapped by this process
        assert held not in names                 # open, not mapped: still in use
        # and unlinking a segment in use is refused
        seg = next(s for s in _scan().suspects if s.kind == m.KIND_SHM and s.identity.name == leaked_shm)
        with open(f"/dev/shm/{leaked_shm}", "r+b") as fh:
            mm = mmap.mmap(fh.fileno(), 4096)
            res = perform(seg)
            mm.close()
        assert res.result == "refused" and f"is in use by pid {os.getpid()}" in res.message
    finally:
        os.close(fd)
        os.unlink(f"/dev/shm/{held}")
        mapped.close()
        mapped.unlink()


def test_fresh_segment_waits_for_min_age(leaked_shm):
    young = Scanner(use_gpu=False, shm_min_age_s=3600).scan()
    assert young.by_shm(leaked_shm) is None


def test_replaced_segment_is_refused(leaked_shm):
    seg = _scan().by_shm(leaked_shm)
    os.unlink(f"/dev/shm/{leaked_shm}")
    fd = os.open(f"/dev/shm/{leaked_shm}", os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    res = perform(seg)
    assert res.result == "refused" and "was replaced since it was listed (inode changed)" in res.message
    assert os.path.exists(f"/dev/shm/{leaked_shm}")


def test_parent_that_does_not_reap(reaper):
    z = reaper("zombie", reap=False)
    s = _scan().by_pid(z["zombie"])
    assert s.kind == m.KIND_ZOMBIE and s.actions == [m.SIGNAL_PARENT]
    assert "terminate the parent" in s.advice
    res = perform(s)
    assert res.result == "not-reaped" and not res.ok
    assert f"terminate the parent (gpuscope cleanup --kill {z['parent']})" in res.message
    assert state_of(z["zombie"]) == "Z"
    # terminating the parent hands the zombie to its subreaper (the test's reaper), which reaps it
    assert act(identify(z["parent"]), policy=Policy(grace_s=2)).ok
    assert wait_for(lambda: state_of(z["zombie"]) is None)


def test_terminate_on_a_zombie_explains_instead(reaper):
    z = reaper("zombie", reap=False)
    res = act(identify(z["zombie"]), action=m.TERMINATE)
    assert res.result == "refused" and "signal its parent instead" in res.message


PID1_ZOMBIE = r"""
import json, os, time
import gpuscope.cleanup.model as m
from gpuscope.cleanup import Scanner, act, identify
child = os.fork()
if child == 0:
    os._exit(0)
while open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)
with Scanner(use_gpu=False, shm_min_age_s=1e9) as scanner:
    scanner.observe()
    time.sleep(0.05)
    result = scanner.scan()
s = result.by_pid(child)
res = act(identify(child))
print(json.dumps({"me": os.getpid(), "zombie": child, "suspect": s and s.to_dict(),
                  "notes": result.notes, "act": res.to_dict()}))
"""


def test_zombies_of_pid_1_get_advice_not_signals(run_env):
    """A real zombie of a PID 1 that does not reap: made in a new PID namespace, where this
    script is PID 1 and never reaps its exited child (the namespace ends with it)."""
    if shutil.which("unshare") is None:
        pytest.fail("util-linux `unshare` is needed to make a PID namespace")
    # a normal user makes the PID namespace inside a user namespace of its own (-U -r)
    userns = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
    res = subprocess.run(["unshare", *userns, "--pid", "--fork", "--mount-proc", sys.executable, "-c", PID1_ZOMBIE],
                         env=run_env, capture_output=True, text=True, timeout=120)
    if res.returncode != 0 and "Operation not permitted" in res.stderr:
        pytest.skip(f"cannot create a PID namespace here (needs CAP_SYS_ADMIN): {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["me"] == 1
    s = out["suspect"]
    assert s is not None and s["kind"] == m.KIND_ZOMBIE and s["actions"] == []
    assert s["evidence"]["ppid"] == 1 and s["evidence"]["state"] == "zombie"
    assert "its parent is PID 1 (" in s["reasons"][0]["text"] and "does not reap" in s["reasons"][0]["text"]
    assert "--init" in s["advice"] and s["blocked"].startswith("no action can remove it")
    assert any("has not reaped 1 zombie(s) it adopted" in n for n in out["notes"])
    assert out["act"]["result"] == "advice" and "--init" in out["act"]["message"]


def test_terminate_escalates_to_sigkill_after_grace(reaper):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    pid = reaper("spawn", argv=[sys.executable, "-c", code], setsid=True)["pid"]
    wait_quiet(pid)   # started up and ignoring SIGTERM
    t0 = time.monotonic()
    res = act(identify(pid), policy=Policy(grace_s=0.5))
    assert res.ok and "SIGKILL after the 0.5 s grace period" in res.message
    assert 0.5 <= time.monotonic() - t0 < 30   # the grace was 0.5 s (the message says so); slack for a loaded machine
    assert res.freed["rss_bytes"] > 1 << 20


def test_listing_json_round_trips(reaper, store):
    run_id = make_finished_run(store)
    pid = reaper("sleeper", env={"GPUSCOPE_RUN_ID": run_id})["pid"]
    result = _scan(store)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["gpu_checked"] is False and data["gpu_skip_reason"] and data["observed_s"] >= 0
    assert data["notes"] == result.notes
    row = [s for s in data["suspects"] if s["key"] == f"pid:{pid}"]
    assert len(row) == 1, [s["key"] for s in data["suspects"]]
    s, now = row[0], processes.read(pid)
    assert s["kind"] == "process" and s["actions"] == ["terminate", "kill"] and s["blocked"] is None
    assert [r["code"] for r in s["reasons"]] == ["run-leftover"] and run_id in s["reasons"][0]["text"]
    assert s["identity"] == {"pid": pid, "create_time": now.create_time}
    ev = s["evidence"]
    assert ev["pid"] == pid and ev["ppid"] == reaper.pid and ev["run_id"] == run_id
    assert ev["run_status"] == "stopped" and ev["state"] == "sleeping" and ev["uid"] == os.getuid()
    assert "time.sleep(600)" in ev["cmdline"] and ev["session"] == now.sid and ev["threads"] == 1
    assert ev["rss_bytes"] > 1 << 20 and ev["gpu_memory_bytes"] is None and ev["gpu_devices"] == []
    assert ev["parent"] == f"{processes.read(reaper.pid).comm} (pid {reaper.pid})"
    assert ev == result.by_pid(pid).evidence.to_dict()


def test_zombie_of_pid_1_listing_gives_advice_not_actions():
    """The listing logic for a zombie adopted by PID 1 (made as data: a real one could never be
    reaped on these machines)."""
    from gpuscope.cleanup.snapshot import ProcInfo, ProcTable, read_process
    from gpuscope.cleanup.suspects import zombie_suspect

    scanner = Scanner(use_gpu=False)
    scanner.observe()
    init = read_process(1)
    ghost = ProcInfo(pid=4_000_001, ppid=1, pgid=4_000_001, sid=4_000_001, state="Z", comm="nsys",
                     cpu_ticks=0, threads=1, start_ticks=1, rss_pages=0)
    table = ProcTable({1: init, ghost.pid: ghost}, time.monotonic())
    s = zombie_suspect(scanner, ghost, table, time.time())
    assert s.actions == [] and s.kind == m.KIND_ZOMBIE
    assert f"its parent is PID 1 ({init.name}), which does not reap" in s.reasons[0].text
    assert "docker run --init" in s.advice and s.blocked.startswith("no action can remove it")


def test_a_zombie_seen_only_in_the_last_observation_is_not_listed(reaper):
    scanner = Scanner(use_gpu=False, shm_min_age_s=1e9)
    scanner.observe()
    z = reaper("zombie", reap=False)["zombie"]        # appears after the first observation
    assert scanner.scan().by_pid(z) is None            # could be a parent about to reap
    assert scanner.scan().by_pid(z) is not None        # still there one observation later
