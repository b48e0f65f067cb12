"""Findings of runs stopped mid-run (SIGINT to `gpuscope run`, as Ctrl-C sends): a task cut by the
stop counts up to the stop, and rules a stop can distort say so or stay silent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from gpuscope.findings.engine import analyse_run
from gpuscope.findings.registry import STOPPED_NOTE
from gpuscope.trace.events import ProcessEvents, read_run_events

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _workers(events: list[ProcessEvents]) -> list[ProcessEvents]:
    return [pe for pe in events if pe.role == "pool worker"]


def _stopped_run(script: str, run_env: dict[str, str], ready: Callable[[list[ProcessEvents]], bool]) -> Path:
    """Run ``script`` under `gpuscope run`, send it SIGINT once its event logs show ``ready``; the folder."""
    runs = Path(run_env["GPUSCOPE_HOME"]) / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "run", "--quiet", str(SCRIPTS / script)],
                            env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    folder = None
    try:
        for _ in range(3000):      # a generous bound (the scenarios need 4 to 18 s)
            found = sorted(runs.glob("*/events")) if runs.exists() else []
            if found and ready(read_run_events(found[-1].parent)):
                folder = found[-1].parent
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert folder is not None, "the run never reached the moment to stop it"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return folder


def test_a_uniform_pool_stopped_mid_run_is_not_called_imbalanced(run_env):
    # stopped 1.5 s after the first worker finished its second 8 s task: the second (2.5 s late)
    # is inside its second one; each loses the task it is in (they ignore SIGINT)
    state = {}

    def ready(events: list[ProcessEvents]) -> bool:
        if not any(pe.range_count >= 2 for pe in _workers(events)):
            return False
        state.setdefault("t", time.monotonic())
        return time.monotonic() - state["t"] >= 1.5    # not at a task's end: in the middle of both

    folder = _stopped_run("stop_uniform.py", run_env, ready)
    done = sorted(pe.range_count for pe in _workers(read_run_events(folder)))
    assert done == [1, 2], done        # what the scenario needs: the stop cut one task more of one worker
    codes = [f.code for f in analyse_run(folder)]
    assert "load-imbalance" not in codes, codes


def test_an_unbalanced_pool_stopped_mid_run_still_is(run_env):
    # one worker in its 8 s task, the other done with the five short ones and waiting
    state = {}

    def ready(events: list[ProcessEvents]) -> bool:
        if not any(pe.range_count >= 5 for pe in _workers(events)):
            return False
        state.setdefault("t", time.monotonic())
        return time.monotonic() - state["t"] >= 1.5    # the long task goes on a while longer

    folder = _stopped_run("stop_unbalanced.py", run_env, ready)
    # the live recorder kept when it saw the stop: the moment the SIGINT closes task ranges
    assert isinstance(json.loads((folder / "findings.json").read_text())["stop_ns"], int)
    (found,) = [f for f in analyse_run(folder) if f.code == "load-imbalance"]
    assert STOPPED_NOTE in found.title
    assert found.evidence.number("busy max s") > 2 * found.evidence.number("busy min s"), found.evidence
