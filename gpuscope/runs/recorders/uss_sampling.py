"""USS (memory only a process holds) of each process of a run, sampled a few times a second.

Comparing start methods is where USS matters: a fork child shares its parent's pages (copy on
write) and its RSS counts them, its USS does not. Reading ``smaps_rollup`` walks the process's page
tables (about a millisecond for a large process), so the telemetry sampler leaves it off; this
recorder is added by ``gpuscope.runs.series`` (start-method comparisons) and writes the peak per
process to ``uss.json`` in the run folder ({pid: bytes}), read by ``gpuscope.analysis``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from gpuscope.runs.recorder import BaseRecorder, Outcome, RunContext

USS_FILE = "uss.json"


class UssRecorder(BaseRecorder):
    """Peak USS per process of the run (the pids come from the telemetry batches)."""

    name = "uss"

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.peaks: dict[int, int] = {}
        self._pids: set[int] = set()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: RunContext | None = None

    def started(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._pids.add(ctx.pid)
        self._thread = threading.Thread(target=self._loop, name="gpuscope-uss", daemon=True)
        self._thread.start()

    def on_batch(self, batch: Any) -> None:
        for p in batch.processes:     # cheap: only note the pids; the reading is on our thread
            self._pids.add(p.pid)
        for pid in batch.ended:
            self._pids.discard(pid)

    def _loop(self) -> None:
        from gpuscope.procs.read import uss_bytes

        while True:
            for pid in list(self._pids):
                value = uss_bytes(pid)
                if value:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), value)
            if self._done.wait(self.interval_s):
                return

    def program_ended(self, ctx: RunContext) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def finish(self, outcome: Outcome) -> None:
        self._done.set()
        if self._ctx is None or not self.peaks:
            return
        (self._ctx.run_dir / USS_FILE).write_text(json.dumps({str(k): v for k, v in sorted(self.peaks.items())}))
