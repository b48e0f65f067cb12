"""Fixtures for cleanup tests: a subreaper that builds real scenarios, a run store with a
finished run, real /dev/shm segments with a unique prefix, and the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

import pytest

from tests.cleanup.util import PREFIX

HELPERS = Path(__file__).parent / "helpers"
PY = sys.executable


class Reaper:
    """Drives helpers/reaper.py (see its docstring)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([PY, str(HELPERS / "reaper.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        hello = json.loads(self.proc.stdout.readline())
        if "ready" not in hello:        # PR_SET_CHILD_SUBREAPER exists since Linux 3.4
            self.close()
            pytest.fail(f"cannot become a child subreaper (prctl PR_SET_CHILD_SUBREAPER): {hello}")
        self.pid = hello["ready"]

    def __call__(self, op: str, **kw) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        assert "error" not in reply, reply
        return reply

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        finally:
            self.proc.wait(timeout=30)


@pytest.fixture
def reaper():
    r = Reaper()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def store(gpuscope_home):
    from gpuscope.store.db import connect

    conn = connect()
    yield conn
    conn.close()


@pytest.fixture
def leaked_shm():
    """A real POSIX segment that nobody maps and nobody will unlink (the tracker forgets it)."""
    name = PREFIX + uuid.uuid4().hex[:10]
    shm = shared_memory.SharedMemory(name=name, create=True, size=1 << 20)
    shm.buf[: 1 << 20] = b"x" * (1 << 20)   # touch every page: 1 MiB really in RAM
    resource_tracker.unregister(shm._name, "shared_memory")
    shm.close()
    try:
        yield name
    finally:
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")
