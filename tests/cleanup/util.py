"""Helpers for cleanup tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

PY = sys.executable
PREFIX = "psm_gpuscopetest_"


def make_finished_run(conn, status: str = "stopped") -> str:
    from gpuscope.store import runs

    run_id = "cleanuptest-" + uuid.uuid4().hex[:8]
    spec = {"script": "train.py", "launcher": "python", "start_method": "fork"}
    runs.insert_run(conn, run_id=run_id, spec=spec, run_dir="/nonexistent", versions={})
    now = time.time_ns()
    runs.mark_started(conn, run_id, now - 60_000_000_000)
    runs.finish_run(conn, run_id, status=status, ended_ns=now - 1_000_000_000, exit_code=None,
                    signal="SIGTERM")
    return run_id


def cli(run_env, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gpuscope", "cleanup", *args], env=run_env,
                          capture_output=True, text=True, timeout=timeout)


def cli_json(run_env, *args: str) -> tuple[int, dict]:
    res = cli(run_env, "--json", *args)
    assert res.stdout.strip(), res.stderr
    return res.returncode, json.loads(res.stdout)


def state_of(pid: int) -> str | None:
    """The one-letter state of ``pid``, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def wait_for(pred, timeout: float = 10.0, step: float = 0.05):
    end = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() > end:
            return value
        time.sleep(step)


def wait_quiet(pid: int, timeout: float = 15.0) -> None:
    """Wait until ``pid`` has finished starting up: no CPU time used for 0.3 s."""
    import psutil

    proc = psutil.Process(pid)
    end = time.monotonic() + timeout
    before = sum(proc.cpu_times()[:2])
    while time.monotonic() < end:
        time.sleep(0.3)
        now = sum(proc.cpu_times()[:2])
        if now - before < 0.005:
            return
        before = now
    raise AssertionError(f"pid {pid} kept using CPU for {timeout} s")


# multiprocessing names its semaphores /mp-XXXXXXXX (the file sem.mp-XXXXXXXX); ours add a marker
SEM_HOLDER = r"""
import _multiprocessing, sys, time
lock = _multiprocessing.SemLock(1, 1, 1, sys.argv[1], False)   # SEMAPHORE, value 1, not unlinked
lock.acquire()
print("ready", flush=True)
time.sleep(120)
"""


@contextmanager
def held_semaphore() -> Iterator[tuple[str, subprocess.Popen]]:
    """A real named semaphore made through CPython's own ``_multiprocessing.SemLock`` (what a
    multiprocessing Lock uses under spawn/forkserver), held by a live process: yields (the
    /dev/shm file's name, the process). Kill the process to leave it behind; both go at the end."""
    name = "mp-gpuscopetest-" + uuid.uuid4().hex[:10]
    proc = subprocess.Popen([PY, "-c", SEM_HOLDER, "/" + name], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert os.path.exists(f"/dev/shm/sem.{name}")
        yield f"sem.{name}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
        if os.path.exists(f"/dev/shm/sem.{name}"):
            os.unlink(f"/dev/shm/sem.{name}")
