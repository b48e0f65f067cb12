"""Identity-checked signals on real processes: a stale (pid, start) is never signalled, with or
without pidfds; terminate escalates to SIGKILL for a process that ignores SIGTERM."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import time

import pytest

from gpuscope.procs import signals
from gpuscope.procs.key import ProcKey
from gpuscope.procs.read import key_of, read

IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); "
                "time.sleep(600)")


@pytest.fixture
def sleeper():
    procs: list[subprocess.Popen] = []

    def start(code: str = "import time; print(1, flush=True); time.sleep(600)") -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        assert p.stdout is not None and p.stdout.readline()   # its handlers are set
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.fixture(params=["pidfd", "no-pidfd"])
def mode(request, monkeypatch):
    if request.param == "no-pidfd":
        def no_pidfd(pid: int, flags: int = 0) -> int:
            raise OSError(errno.ENOSYS, "pidfd_open not implemented")

        monkeypatch.setattr(signals.os, "pidfd_open", no_pidfd)
    return request.param


def test_a_stale_identity_is_never_signalled(sleeper, mode):
    p = sleeper()
    key = key_of(p.pid)
    assert key is not None
    stale = ProcKey(p.pid, key.start - 1)           # the same pid, another process
    assert signals.send_signal(stale, signal.SIGKILL) is False
    with pytest.raises(signals.ProcGoneError):
        signals.ProcHandle(stale)
    time.sleep(0.1)
    assert p.poll() is None and read(p.pid) is not None
    assert signals.send_signal(key, signal.SIGTERM) is True
    assert p.wait(timeout=10) == -signal.SIGTERM


def test_terminate_escalates_and_reports_nothing_left(sleeper, mode):
    stubborn, polite = sleeper(IGNORES_TERM), sleeper()
    keys = {key_of(stubborn.pid), key_of(polite.pid)}
    left = signals.terminate({k for k in keys if k is not None}, grace_s=0.3)
    assert left == set()
    assert polite.wait(timeout=10) == -signal.SIGTERM and stubborn.wait(timeout=10) == -signal.SIGKILL


def test_pids_zero_and_below_are_no_process(mode):
    for pid in (0, -1):
        assert signals.send_signal(ProcKey(pid, 0), signal.SIGTERM) is False
