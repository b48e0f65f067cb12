"""A program that ends while gpuscope still loads what records it: the recorders skip what only
serves a running program (the telemetry sampler, NVML), and the run says so as before."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from gpuscope.runs.recorder import RunContext
from gpuscope.runs.recorders.telemetry_sampling import TelemetryRecorder
from gpuscope.spec import RunSpec
from gpuscope.telemetry import NOT_OPENED


def _ctx(pid: int, folder: str) -> RunContext:
    return RunContext(RunSpec("s.py"), "r1", folder, pid, time.time_ns(), threading.Event())


def _exited(proc: subprocess.Popen[bytes]) -> None:
    """Wait until ``proc`` has exited, without reaping it (as when Run.wait has not yet run)."""
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)


def test_main_running_says_whether_the_first_process_has_exited(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _ctx(proc.pid, str(tmp_path)).main_running()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    _exited(proc)
    assert not _ctx(proc.pid, str(tmp_path)).main_running()
    assert proc.wait() == 0     # not reaped by the look: Run.wait still gets its exit status
    assert _ctx(1, str(tmp_path)).main_running()    # not ours to wait for: taken as running


def test_a_program_that_ended_first_gets_no_sampler_and_the_same_note(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    _exited(proc)
    ctx = _ctx(proc.pid, str(tmp_path))
    recorder = TelemetryRecorder(store_path=tmp_path / "store.sqlite")
    recorder.started(ctx)
    assert recorder.sampler is None
    recorder.main_exited(ctx)
    recorder.program_ended(ctx)
    assert ctx.notes == [f"GPU telemetry off: {NOT_OPENED}"]
    proc.wait()


def test_a_running_program_is_sampled(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    ctx = _ctx(proc.pid, str(tmp_path))
    recorder = TelemetryRecorder(store_path=tmp_path / "store.sqlite")
    try:
        recorder.started(ctx)
        assert recorder.sampler is not None and recorder.sampler.running
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
        recorder.main_exited(ctx)
        recorder.program_ended(ctx)
    assert recorder.sampler is not None and not recorder.sampler.running
    assert f"GPU telemetry off: {NOT_OPENED}" not in ctx.notes
