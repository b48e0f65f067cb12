"""The Ray object store of a run: a probe that starts only when the run starts a Ray cluster.

A run without Ray pays one look at the OS names of each batch's processes (a few µs): until one is
Ray's ``raylet`` or ``gcs_server``; then, about once a second, for the driver's GCS
address in the event logs (``ray.init`` writes it; the run's reader reads them); then it starts the probe
(``gpuscope.telemetry.ray_store``). The probe ends with the program; ``finish`` adds one note
with the store's peak and spill figures (the findings read ``ray_store.jsonl``).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext

if TYPE_CHECKING:
    from gpuscope.telemetry.batch import SampleBatch
    from gpuscope.telemetry.ray_store import RayStoreProbe
    from gpuscope.trace.events import RunEvents

RAY_PROGRAMS = ("raylet", "gcs_server")


class RayObjectStoreRecorder(BaseRecorder):
    name = "ray object store"

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self._run_dir: str | None = None
        self._ray_seen = False
        self._next_look = 0.0
        self._ended = False
        self._events: RunEvents | None = None
        self.probe: RayStoreProbe | None = None

    def prepare(self, launch: Launch) -> None:
        self._run_dir = launch.run_folder

    def started(self, ctx: RunContext) -> None:
        self._events = ctx.events

    def on_batch(self, batch: SampleBatch) -> None:
        if self.probe is not None or self._ended or self._run_dir is None or self._events is None:
            return
        if not self._ray_seen:
            # every process of the batch, not only the new ones: a raylet is first seen as the fork
            # child that is about to exec it (its OS name changes a moment later)
            self._ray_seen = any(p.name in RAY_PROGRAMS for p in batch.processes)
            if not self._ray_seen:
                return
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + 1.0
        from gpuscope.telemetry.ray_store import RayStoreProbe

        self._events.refresh(ranges=False)
        found = ray_driver(self._events.headers())
        if found is None:
            return
        address, executable, ray_env = found
        probe = RayStoreProbe(self._run_dir, address, executable, self.interval_s, ray_env)
        probe.start()
        self.probe = probe

    def program_ended(self, ctx: RunContext) -> None:
        self._ended = True
        if self.probe is not None:
            self.probe.stop()

    def finish(self, outcome: Outcome) -> None:
        self._ended = True
        if self.probe is None:
            return
        self.probe.stop()
        from gpuscope.telemetry.ray_store import mib, read_ray_store, summarize

        s = summarize(read_ray_store(os.path.dirname(self.probe.path)))
        if s is None:
            why = f": {self.probe.errors[-1]}" if self.probe.errors else ""
            outcome.notes.append(f"Ray object store: no figures from the cluster{why}")
            return
        outcome.notes.append(
            f"Ray object store: peak {mib(s['peak_used'])} of {mib(s['capacity'])}, "
            f"{s['peak_objects']} objects at most; spilled {mib(s['spilled_bytes'])} "
            f"({s['spilled_objects']} objects) to disk ({s['samples']} samples, ray_store.jsonl)")


def ray_driver(identities: dict[int, dict[str, Any]]) -> tuple[str, str, dict[str, str]] | None:
    """(GCS address, interpreter, Ray's environment for a client of the cluster) of the run's Ray
    driver, once a process of the run has called ``ray.init`` (its info says so: docs/EVENTS.md),
    else None. Ray authenticates clients with a token (~/.ray/auth_token) when
    ``RAY_AUTH_MODE=token``, which ``ray.init`` sets in the driver."""
    for info in identities.values():
        address, executable = info.get("ray_gcs_address"), info.get("executable")
        if address and executable:
            env = {"RAY_AUTH_MODE": str(info["ray_auth_mode"])} if info.get("ray_auth_mode") else {}
            return str(address), str(executable), env
    return None
