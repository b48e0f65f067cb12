"""Under `gpuscope run --nsys`, pool workers end through C exit() on SIGTERM (so nsys flushes their
ranges). A Python handler runs only when the main thread gets back to Python; when SIGTERM lands on
another thread (nsys's own threads live in the process), a worker blocked on the task queue's lock
would never end and the program's ``with Pool()`` would hang. The hook's fallback thread ends it.

The test needs no nsys: GPUSCOPE_UNDER_NSYS=1 turns the nsys behaviour of the hook on, and the task
blocks SIGTERM in its main thread, so the signal can only land on another thread, as under nsys.
"""

from __future__ import annotations

import re

from gpuscope.trace.events import read_run_events
from tests.runs.helpers import gpuscope, script, summary


def test_a_worker_whose_main_thread_cannot_take_sigterm_still_ends(run_env):
    env = dict(run_env, GPUSCOPE_UNDER_NSYS="1")
    proc = gpuscope("run", "--json", script("sigterm_blocked_worker.py"), env=env, timeout=180)
    data = summary(proc)
    out = proc.stdout.decode()
    took = float(re.search(r"terminated in ([\d.]+) s", out).group(1))
    assert took < 30, out          # the task sleeps 60 s: without the fallback terminate() waits for it
    assert data["status"] == "exited", data
    worker = next(pe for pe in read_run_events(data["run_dir"]) if pe.role == "pool worker")
    assert worker.exit is not None and worker.exit.get("exit_code") == 143, worker.exit
