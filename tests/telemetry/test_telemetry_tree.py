"""The process tree with real processes: a Pool(4), a zombie, double-fork escapees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpuscope.telemetry.gpu import NoGpuBackend
from gpuscope.telemetry.sampler import RunSampler
from tests import requires

def no_gpu() -> NoGpuBackend:
    return NoGpuBackend("no NVIDIA GPU / driver (test)")


def start(code: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A real run root, in its own session like the launcher makes it."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], start_new_session=True,
                            env={**os.environ, **(env or {})})


def kill_quietly(*pids: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


POOL = """
    import multiprocessing as mp, time
    def init(b):
        global barrier
        barrier = b
    def work(n):
        barrier.wait(30)                         # one task per worker, all four busy at once
        block = bytearray(40 << 20)          # 40 MiB, touched
        for i in range(0, len(block), 4096):
            block[i] = 1
        t = time.process_time()
        while time.process_time() - t < 0.5:     # CPU time, so a loaded machine only stretches it
            pass
        time.sleep(0.3)
        return len(block)
    if __name__ == "__main__":
        mp.set_start_method("fork")
        with mp.Pool(4, initializer=init, initargs=(mp.Barrier(4),)) as pool:
            pool.map(work, range(4), chunksize=1)
        time.sleep(0.6)
"""


def test_pool_of_four_workers_cpu_rss_over_time_and_end():
    root = start(POOL)
    s = RunSampler(root.pid, 0.1, gpu=no_gpu())
    batches = []
    s.add_listener(batches.append)
    s.start()
    try:
        root.wait(timeout=60)
    finally:
        s.stop()
        kill_quietly(root.pid)
    summary = s.process_summary()
    workers = [pid for pid, d in summary.items() if d["ppid"] == root.pid and d["via"] == "parent"]
    assert len(workers) >= 4, summary
    ended = {pid for b in batches for pid in b.ended}
    for pid in workers:
        series = [p for b in batches for p in b.processes if p.pid == pid]
        assert len(series) >= 3
        assert max(p.cpu or 0 for p in series) > 5           # busy while burning, whatever the load
        assert max(p.rss for p in series) > 40 << 20
        assert pid in ended and not summary[pid]["alive"]
        assert summary[pid]["cpu_seconds"] >= 0.3 and summary[pid]["peak_rss_bytes"] > 40 << 20
        assert summary[pid]["peak_gpu_mem_bytes"] is None           # no GPU here
    # the workers ended before the root did (it sleeps 0.6 s after the pool)
    last_worker = max(b.t_ns for b in batches for p in b.processes if p.pid in workers)
    last_root = max(b.t_ns for b in batches for p in b.processes if p.pid == root.pid)
    assert last_root - last_worker > 0.3e9


def test_zombie_child_is_reported_in_state_z():
    root = start("""
        import os, time
        if os.fork() == 0:
            os._exit(0)
        time.sleep(30)
    """)
    try:
        s = RunSampler(root.pid, 0.1, gpu=no_gpu())
        states = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            states = {p.pid: p.state for p in s.sample_once().processes}
            if "Z" in states.values():
                break
            time.sleep(0.1)
        zombies = [pid for pid, st in states.items() if st == "Z"]
        assert len(zombies) == 1 and zombies[0] != root.pid
        assert s.process_summary()[zombies[0]]["state"] == "Z"
    finally:
        root.kill()
        root.wait()


ESCAPE = """
    import os, sys, time
    def daemon(new_session):
        if os.fork() == 0:
            if new_session:
                os.setsid()
            if os.fork() == 0:
                with open(sys.argv[1] + ("-setsid" if new_session else "-same"), "w") as fh:
                    fh.write(str(os.getpid()))
                time.sleep(60)
                os._exit(0)
            os._exit(0)
        os.wait()
    time.sleep(float(sys.argv[2]))
    daemon(True)
    daemon(False)
    time.sleep(60)
"""


def _escape_run(tmp_path: Path, delay: float, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(ESCAPE), str(tmp_path / "pid"), str(delay)],
                            start_new_session=True, env={**os.environ, **env})


def _wait_pids(tmp_path: Path) -> dict[str, int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pids = {k: int((tmp_path / f"pid-{k}").read_text()) for k in ("setsid", "same")}
            return pids
        except (OSError, ValueError):
            time.sleep(0.05)
    raise AssertionError("escapees did not start")


@pytest.mark.parametrize("when", ["before", "during"])
def test_double_fork_and_setsid_escapees_are_still_sampled(tmp_path, when):
    run_id = f"test-escape-{os.getpid()}-{when}"
    root = _escape_run(tmp_path, 0.0 if when == "before" else 0.5, {"GPUSCOPE_RUN_ID": run_id})
    pids: dict[str, int] = {}
    try:
        if when == "before":   # the escape is over before the sampler starts: only env/session can tell
            pids = _wait_pids(tmp_path)
            time.sleep(0.2)
        s = RunSampler(root.pid, 0.05, gpu=no_gpu(), run_id=run_id)
        s.start()
        pids = pids or _wait_pids(tmp_path)
        time.sleep(0.5)
        s.stop()
        summary = s.process_summary()
        setsid, same = summary[pids["setsid"]], summary[pids["same"]]
        assert setsid["alive"] and setsid["escaped"] == "new session" and setsid["orphaned"]
        assert same["alive"] and same["escaped"] is None and same["orphaned"]
        if when == "before":
            assert setsid["via"] == "env" and same["via"] == "session"
        assert s.escaped_pids() == [pids["setsid"]]
        assert summary[pids["setsid"]]["last_seen_ns"] > summary[pids["setsid"]]["first_seen_ns"]
    finally:
        kill_quietly(root.pid, *pids.values())
        root.wait()


def test_without_marker_a_finished_setsid_escape_is_not_claimed(tmp_path):
    """The rules are honest: no env marker and no parent link, no membership."""
    root = _escape_run(tmp_path, 0.0, {})
    pids: dict[str, int] = {}
    try:
        pids = _wait_pids(tmp_path)
        time.sleep(0.2)
        s = RunSampler(root.pid, 0.05, gpu=no_gpu())
        found = {p.pid for p in s.sample_once().processes}
        assert pids["setsid"] not in found and pids["same"] in found
    finally:
        kill_quietly(root.pid, *pids.values())
        root.wait()


def test_unknown_pid_is_an_error():
    with pytest.raises(ProcessLookupError):
        RunSampler(2 ** 22 + 12345, 0.1, gpu=no_gpu())


TORCHRUN_WORKER = """
import os, time
time.sleep(3)
"""


@pytest.mark.torch
def test_torchrun_agent_and_workers_are_in_the_tree(tmp_path):
    requires.torch()
    script = tmp_path / "worker.py"
    script.write_text(TORCHRUN_WORKER)
    root = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                             "--standalone", str(script)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        s = RunSampler(root.pid, 0.1, gpu=no_gpu())
        s.start()
        root.wait(timeout=120)
        s.stop()
    finally:
        if root.poll() is None:
            os.killpg(root.pid, signal.SIGKILL)
            root.wait()
    summary = s.process_summary()
    workers = [d for d in summary.values() if d["ppid"] == root.pid and str(script) in " ".join(d["cmdline"])]
    assert len(workers) == 2, summary
    assert summary[root.pid]["via"] == "root" and summary[root.pid]["cpu_seconds"] > 0.1
    # torch elastic starts each worker in a session of its own: the root's killpg does not reach it
    assert all(w["escaped"] == "new session" and not w["alive"] for w in workers)
