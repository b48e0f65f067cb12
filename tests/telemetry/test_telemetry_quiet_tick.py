"""What a quiet sampler tick skips, and that it still sees everything: a process started after
``/proc`` listings were skipped is found on the next tick; the host figures read from /proc/stat
and /proc/meminfo equal psutil's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from gpuscope.procs.files import read_bytes
from gpuscope.procs import files as procfs
from gpuscope.telemetry import host
from gpuscope.telemetry.tree import ProcessTree

# The root starts a child when its stdin gets a line; both sleep until killed.
ROOT = """
import os, sys, time
sys.stdin.readline()
if os.fork() == 0:
    time.sleep(600); os._exit(0)
time.sleep(600)
"""


def test_a_child_started_while_listings_were_skipped_is_found_on_the_next_tick(monkeypatch):
    listings = []
    real = procfs.list_pids
    monkeypatch.setattr(procfs, "list_pids", lambda: listings.append(1) or real())
    stable = [None]   # the kernel's last pid as the tree sees it: held still, then moved on
    real_last = procfs.last_pid
    monkeypatch.setattr(procfs, "last_pid", lambda f: stable[0] if stable[0] is not None else real_last(f))
    root = subprocess.Popen([sys.executable, "-c", ROOT], stdin=subprocess.PIPE, start_new_session=True)
    tree = ProcessTree(root.pid)
    try:
        t = time.monotonic_ns()
        stable[0] = 1000
        for i in range(4):                      # same last pid: listed twice, then skipped
            tree.update(t + i * 100_000_000)
        assert len(listings) == 2, listings
        assert tree.pids() == {root.pid}
        root.stdin.write(b"go\n")
        root.stdin.flush()
        deadline = time.monotonic() + 60
        while len(psutil.Process(root.pid).children()) < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        child = psutil.Process(root.pid).children()[0].pid
        tree.update(t + 4 * 100_000_000)        # last pid unchanged: nothing listed, nothing new
        assert child not in tree.pids()
        stable[0] = 1001                         # a new pid was handed out: listed, found
        started, _ = tree.update(t + 5 * 100_000_000)
        assert [r.pid for r in started] == [child]
        assert tree.pids() == {root.pid, child}
        stable[0] = 1001
        tree.update(t + 6 * 100_000_000)
        tree.update(t + 7 * 100_000_000)
        n = len(listings)
        tree.update(t + 20 * 100_000_000)       # a second after the last listing: listed anyway
        assert len(listings) == n + 1
    finally:
        tree.close()
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()


def test_last_pid_moves_when_a_process_starts():
    loadavg = procfs.ProcFile.host("loadavg", 256)
    try:
        before = procfs.last_pid(loadavg)
        pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                             text=True, check=True).stdout.strip()
        after = procfs.last_pid(loadavg)
        assert before is not None and after is not None and after != before
        assert after >= int(pid) or after < before   # pids wrap around at pid_max
    finally:
        loadavg.close()


def test_host_cpu_and_memory_equal_psutils():
    ours = host.cpu_busy_idle(read_bytes("/proc/stat", 65536) or b"")
    theirs = [host._busy_idle(t) for t in psutil.cpu_times(percpu=True)]   # seconds, not ticks
    assert ours is not None and len(ours) == len(theirs) == psutil.cpu_count()
    tck = os.sysconf("SC_CLK_TCK")
    for (busy, idle), (pbusy, pidle) in zip(ours, theirs):
        assert abs(busy / tck - pbusy) < 1.0 and abs(idle / tck - pidle) < 1.0   # read moments apart
    meminfo = procfs.ProcFile.host("meminfo")
    try:
        used, total, swap_used, swap_total = host.memory(meminfo)
    finally:
        meminfo.close()
    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    assert total == vm.total and swap_total == sw.total
    assert abs(used - (vm.total - vm.available)) < 256 << 20
    assert abs(swap_used - sw.used) < 256 << 20


def test_a_host_sampler_gives_per_core_percentages_and_closes_its_files():
    h = host.HostSampler()
    fds = len(os.listdir("/proc/self/fd"))
    try:
        assert h.sample().cpu is None          # no interval yet
        time.sleep(0.2)
        s = h.sample()
        assert len(s.cores) == psutil.cpu_count() and all(0.0 <= c <= 100.0 for c in s.cores)
        assert s.mem_total == psutil.virtual_memory().total
    finally:
        h.close()
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_unexpected_proc_stat_text_falls_back():
    assert host.cpu_busy_idle(b"") is None
    assert host.cpu_busy_idle(b"cpu  1 2 3 4\ncpu0 1 x 3 4\n") is None
    ten = b"cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 5 6\n"
    assert host.cpu_busy_idle(ten) == [(55 - 9 - 10 - 9, 9)]  # all - guest - guest_nice - idle
    assert host._meminfo_kib(b"MemTotal:  10 kB\nMemAvailable: 4 kB\n", b"MemAvailable:") == 4
    assert host._meminfo_kib(b"MemTotal:  10 kB\n", b"SwapFree:") is None




WAKES = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
print("done", flush=True)
time.sleep(600)
"""


def _wait_asleep(pid: int, timeout_s: float = 20.0) -> None:
    """Until the process sleeps and its /proc stat text stays the same over 0.1 s: "ready" on its
    stdout comes a few instructions before it blocks, and on a loaded machine those may run later
    (a changed stat text, even one page fault, counts as a wake-up)."""
    deadline, same, last = time.monotonic() + timeout_s, 0, b""
    while same < 5:
        assert time.monotonic() < deadline, f"pid {pid} did not fall asleep"
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
        state = text.rsplit(b")", 1)[1].split()[0]
        same = same + 1 if text == last and state == b"S" else 0
        last = text
        time.sleep(0.02)


def test_a_process_asleep_for_a_while_is_read_less_often_and_seen_when_it_wakes_and_ends(monkeypatch):
    from gpuscope.telemetry import tree as tree_module

    reads: list[int] = []
    real = procfs.StatReader.read_raw
    monkeypatch.setattr(procfs.StatReader, "read_raw", lambda self, pid: reads.append(pid) or real(self, pid))
    root = subprocess.Popen([sys.executable, "-c", WAKES], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True)
    tree = ProcessTree(root.pid)
    step, t = 100_000_000, time.monotonic_ns()

    def ticks(n: int) -> list[int]:
        nonlocal t
        ended = []
        for _ in range(n):
            t += step
            ended += [r.pid for r in tree.update(t)[1]]
        return ended

    try:
        assert root.stdout.readline() == b"ready\n"     # asleep on its stdin from here
        _wait_asleep(root.pid)
        ticks(2 + tree_module.IDLE_AFTER)              # found, then read every tick until idle
        reads.clear()
        ticks(4 * tree_module.IDLE_EVERY)
        assert reads.count(root.pid) == 4, reads      # one tick in IDLE_EVERY
        cpu = tree.summary(gpu=False)[root.pid]["cpu_seconds"]
        root.stdin.write(b"go\n")
        root.stdin.flush()
        assert root.stdout.readline() == b"done\n"     # 0.3 s of CPU, then asleep again
        _wait_asleep(root.pid)
        ticks(tree_module.IDLE_EVERY)                  # read again within IDLE_EVERY ticks
        assert tree.summary(gpu=False)[root.pid]["cpu_seconds"] >= cpu + 0.25
        reads.clear()
        ticks(tree_module.IDLE_EVERY)                  # awake again: read every tick
        assert reads.count(root.pid) == tree_module.IDLE_EVERY
        ticks(tree_module.IDLE_AFTER)
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()
        assert ticks(tree_module.IDLE_EVERY) == [root.pid]   # its end, within IDLE_EVERY ticks
    finally:
        tree.close()
        try:
            os.killpg(root.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        root.wait()
