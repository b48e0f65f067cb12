"""Does NVTX from Python record under this nsys? Profile a one-line script and count what landed.

Used by ``gpuscope doctor``. The probe goes through the same :mod:`gpuscope.nsys.record` pipeline as
a run, so a pass means a run would record too.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from gpuscope.nsys import record
from gpuscope.nsys.diagnostics import Finding
from gpuscope.nsys.locate import NsysInstall
from gpuscope.nsys.lock import NsysLock
from gpuscope.spec import NsysOptions, RunSpec

PROBE_SCRIPT = 'import nvtx\nnvtx.mark("x")\nwith nvtx.annotate("probe"):\n    pass\n'


@dataclass
class ProbeResult:
    """Outcome of one probe: ranges and marks recorded, or why not."""

    ok: bool
    detail: str
    ranges: int = 0
    marks: int = 0
    attempts: int = 0
    steps: list[tuple[str, float]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def count_events(sqlite_path: Path) -> tuple[int, int]:
    """(ranges, marks) in an export's NVTX_EVENTS (0, 0 when the table is absent)."""
    with closing(sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name='NVTX_EVENTS'").fetchone():
            return 0, 0
        row = conn.execute("SELECT SUM(eventType IN (59, 60)), SUM(eventType = 34) FROM NVTX_EVENTS").fetchone()
    return int(row[0] or 0), int(row[1] or 0)


def probe(install: NsysInstall, python: str, timeout_s: float = 60.0, tries: int = 2) -> ProbeResult:
    """Record :data:`PROBE_SCRIPT` with ``python`` under ``install``. A hung nsys is killed and the
    probe retried, as is a recording where nsys's injection did not take."""
    with tempfile.TemporaryDirectory(prefix="gpuscope-probe-") as tmp:
        script = Path(tmp) / "probe.py"
        script.write_text(PROBE_SCRIPT)
        spec = RunSpec(script=str(script), python=python, start_method="spawn",
                       nsys=NsysOptions(enabled=True)).validated()
        lock = NsysLock()  # one nsys recording at a time on a machine: two at once mix their data
        if not lock.acquire(max(120.0, 2 * timeout_s)):
            return ProbeResult(False, "another nsys recording kept this machine busy; try again later")
        try:
            return _attempts(install, spec, Path(tmp), timeout_s, tries)
        finally:
            lock.release()


def _attempts(install: NsysInstall, spec: RunSpec, tmp: Path, timeout_s: float, tries: int) -> ProbeResult:
    result = ProbeResult(False, "not run")
    for attempt in range(1, tries + 1):
        result = _attempt(install, spec, tmp / f"try{attempt}", timeout_s)
        result.attempts = attempt
        flaky = "hung" in result.detail or any(f.code == "nothing-recorded" for f in result.findings)
        if result.ok or not flaky:
            break
    return result


def _attempt(install: NsysInstall, spec: RunSpec, run_dir: Path, timeout_s: float) -> ProbeResult:
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}
    session = record.prepare(spec, run_dir, [spec.python or sys.executable, spec.script], env, install=install)
    t0 = time.monotonic()
    with open(run_dir / "output.log", "wb") as out:
        proc = subprocess.Popen(session.argv, env=session.env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=run_dir, start_new_session=True)
        session.started(proc.pid)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            session.kill()
            proc.wait()
            return ProbeResult(False, f"nsys hung for {timeout_s:.0f} s and was stopped", notes=session.notes)
    if code != 0:
        tail = (run_dir / "output.log").read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return ProbeResult(False, f"the probe exited with code {code}: {tail[0][:200]}", notes=session.notes)
    res = session.finish(timeout_s=max(10.0, timeout_s - (time.monotonic() - t0)))
    if not res.ok or res.sqlite_path is None:
        return ProbeResult(False, res.reason or "no SQLite export", steps=res.steps, notes=session.notes)
    ranges, marks = count_events(res.sqlite_path)
    ok = ranges >= 1 and marks >= 1
    detail = f"{ranges} range(s) and {marks} mark(s) recorded"
    return ProbeResult(ok, detail, ranges, marks, 0, res.steps, res.findings, session.notes)
