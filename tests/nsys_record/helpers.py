"""Helpers for the recording tests: launch nsys as the run engine does, read NVTX rows."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from gpuscope.nsys import agents as procs, locate, record
from gpuscope.nsys.lock import NsysLock
from gpuscope.spec import NsysOptions, RunSpec
from tests.flaky import known_flake, note_retry
from tests.nsys_versions import VERSIONS  # oldest and newest unless GPUSCOPE_TEST_ALL_NSYS=1

__all__ = ["VERSIONS"]   # the recording tests' release list, re-exported for test_record.py

NVTX_SCRIPT = """\
import nvtx, time
nvtx.mark("hello")
with nvtx.annotate("outer"):
    with nvtx.annotate("inner"):
        time.sleep(0.02)
"""
LAUNCHED: list[record.NsysSession] = []
_held = {"depth": 0, "lock": None}


@contextmanager
def nsys_machine_lock():
    """The machine-wide lock gpuscope takes around a recording (two nsys sessions at once mix
    their data); re-entrant within this process, so fixtures and tests can both hold it."""
    if _held["depth"] == 0:
        lock = NsysLock()
        if not lock.acquire(900):
            pytest.fail("another nsys recording kept the machine busy for 15 minutes")
        _held["lock"] = lock
    _held["depth"] += 1
    try:
        yield
    finally:
        _held["depth"] -= 1
        if _held["depth"] == 0:
            _held["lock"].release()
            _held["lock"] = None


def missing(what: str) -> None:
    """Skip on a developer machine, fail under CI: a CI that forgot to provision must not pass."""
    msg = f"{what}; run `python3 scripts/provision_nsys.py` first"
    if os.environ.get("CI") == "true":
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def need(provisioned: dict[str, locate.NsysInstall], version: str) -> locate.NsysInstall:
    if version not in provisioned:
        missing(f"Nsight Systems {version} is not provisioned")
    return provisioned[version]


def make_spec(script: Path, start_method: str = "spawn", python: str | None = None, **nsys) -> RunSpec:
    return RunSpec(script=str(script), python=python or sys.executable, start_method=start_method,
                   nsys=NsysOptions(enabled=True, **nsys)).validated()


def launch(session: record.NsysSession, cwd: Path) -> subprocess.Popen:
    """Start ``session.argv`` as the run engine does: own session, output to a log."""
    LAUNCHED.append(session)
    out = open(cwd / "output.log", "wb")
    proc = subprocess.Popen(session.argv, env=session.env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
    out.close()
    session.started(proc.pid)
    return proc


def record_script(inst: locate.NsysInstall, tmp: Path, source: str, start_method: str = "spawn",
                  python: str | None = None, timeout_s: float = 180.0, tries: int = 2, **nsys):
    """Record ``source`` under ``inst``; returns (session, NsysResult, app output). Only an nsys
    that hangs (still running after ``timeout_s``) is killed and the recording made again, reported
    through tests/flaky.py; whatever the recording gives otherwise is the result the test checks."""
    script = tmp / "script.py"
    script.write_text(source)
    spec = make_spec(script, start_method, python, **nsys)
    with nsys_machine_lock():
        return _record(inst, tmp, spec, timeout_s, tries)


def _record(inst: locate.NsysInstall, tmp: Path, spec: RunSpec, timeout_s: float, tries: int):
    for attempt in range(1, tries + 1):
        run_dir = tmp / f"run{attempt}"
        run_dir.mkdir()
        session = record.prepare(spec, run_dir, [spec.python, spec.script], dict(os.environ), install=inst)
        proc = launch(session, run_dir)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            session.kill(grace_s=0.5)
            proc.wait()
            if attempt < tries:
                note_retry(f"nsys {inst.version} profile (attempt {attempt})", f"hung: still running after "
                           f"{timeout_s:.0f} s")
            continue
        result = session.finish(timeout_s=120)
        output = (run_dir / "output.log").read_text(errors="replace")
        unusable = not result.ok or any(f.code == "nothing-recorded" for f in result.findings)
        flake = known_flake(output + _tool_logs(run_dir)) if unusable else None
        if flake and attempt < tries:
            note_retry(f"nsys {inst.version} recording (attempt {attempt})", flake)
            continue
        return session, result, output
    pytest.fail(f"nsys {inst.version} hung {tries} times in a row (each still running after {timeout_s:.0f} s)")


def _tool_logs(run_dir: Path) -> str:
    """What the import and export steps printed (gpuscope keeps it in nsys-<step>.log)."""
    return "".join(p.read_text(errors="replace") for p in sorted(run_dir.glob("nsys-*.log")))


def nvtx_rows(sqlite_path: Path) -> list[tuple[int, int, str | None]]:
    """(pid, eventType, name) for every NVTX_EVENTS row; names resolved through StringIds."""
    with closing(sqlite3.connect(sqlite_path)) as conn:
        return [(int(p), int(t), n) for p, t, n in conn.execute(
            "SELECT (e.globalTid >> 24) & 16777215, e.eventType, COALESCE(e.text, s.value) "
            "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId")]


def wait_gone(pids, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(procs.alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if procs.alive(p)]
