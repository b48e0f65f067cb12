"""Run a script under the supervisor's real ``Run(spec, recorders=[FindingsRecorder])`` and watch
the findings as they come (stop the run when a condition holds)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpuscope.finding import Finding
from gpuscope.findings.recorder import FindingsRecorder
from gpuscope.spec import RunSpec

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass
class LiveRun:
    run_id: str
    run_dir: Path
    result: object
    findings: list[Finding]                       # as reported live, in order
    final: list[Finding]                          # after finish
    seen_at: dict[str, float] = field(default_factory=dict)   # code -> seconds after start
    during: object = None                         # what the `during` callback returned
    first_stderr_s: float | None = None           # first stderr bytes, seconds after start


def run_live(script: str | Path, *, start_method: str = "default", timeout_s: float = 60.0,
             until: Callable[[list[Finding]], bool] | None = None, during: Callable[[object], object] | None = None,
             stuck_after_s: float = 10.0, args: tuple[str, ...] = (), launcher: str = "python",
             nproc: int = 1) -> LiveRun:
    """Run ``script``; stop it when ``until(findings)`` is true (then call ``during(run)`` first) or at timeout."""
    from gpuscope.runs.supervisor import Run

    found: list[Finding] = []
    seen_at: dict[str, float] = {}
    t0 = time.monotonic()
    event = threading.Event()

    def on_finding(f: Finding) -> None:
        found.append(f)
        seen_at.setdefault(f.code, time.monotonic() - t0)
        if until is not None and until(found):
            event.set()

    rec = FindingsRecorder(on_finding, stuck_after_s=stuck_after_s)
    spec = RunSpec(script=str(script), args=args, start_method=start_method, sample_interval_s=0.1,
                   launcher=launcher, nproc=nproc)
    first_stderr: dict[str, float] = {}

    def note_stderr(stream: str, _chunk: bytes) -> None:
        if stream == "stderr":
            first_stderr.setdefault("t", time.monotonic() - t0)

    run = Run(spec, output=[note_stderr], recorders=[rec])   # the supervisor sequences the recorder
    run.start()
    t0 = time.monotonic()
    out: dict = {}
    done = threading.Event()
    threading.Thread(target=lambda: (out.setdefault("result", run.wait()), done.set()), daemon=True).start()
    while not done.wait(0.1):
        if event.is_set() or time.monotonic() - t0 > timeout_s:
            out["during"] = during(run) if during is not None and event.is_set() else None
            run.stop()
            break
    done.wait(120)
    result = out["result"]
    return LiveRun(run.run_id, run.run_dir, result, found, rec.findings(), seen_at,
                   out.get("during") or {}, first_stderr.get("t"))
