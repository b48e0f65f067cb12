"""Telemetry of the run's process tree (CPU, RSS, GPU) into the store, and per-process peaks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.runs.recorder import BaseRecorder, Outcome, RunContext
from gpuscope.telemetry import NOT_OPENED

if TYPE_CHECKING:
    import threading
    from typing import Any, Callable


class TelemetryRecorder(BaseRecorder):
    """Starts a :class:`gpuscope.telemetry.sampler.RunSampler` once the program runs (its imports
    cost nothing before the program starts), stops it when the program ended, and merges its
    per-process figures into the process rows. ``batch_sink`` receives every batch (the run hands
    them on to the recorders that override ``on_batch``)."""

    name = "telemetry"

    def __init__(self, store_path: Any = None) -> None:
        self._store_path = store_path
        self.sampler: Any = None
        self.batch_sink: Callable[[Any], None] | None = None
        self._ended_first = False    # the program ended before the sampler started: none started
        self._stopping: threading.Thread | None = None   # main_exited's stop, joined when the program ended
        self._stop_error: Exception | None = None

    def started(self, ctx: RunContext) -> None:
        if not ctx.main_running():   # sampling stops as the main process ends: nothing to sample, no NVML
            self._ended_first = True
            return
        from gpuscope.telemetry.sampler import RunSampler

        # lazy: NVML and the store open on the sampler's thread, while the program runs
        self.sampler = RunSampler(ctx.pid, ctx.spec.sample_interval_s,
                                  store=self._store_path if self._store_path is not None else True,
                                  run_id=ctx.run_id, lazy=True, existing=ctx.existing)
        if self.batch_sink is not None:
            self.sampler.add_listener(self.batch_sink)
        self.sampler.start()

    def main_exited(self, ctx: RunContext) -> None:
        """The last sample and the store's last flush, on a thread of their own while the run's
        other processes end (the run waits for those). A process that outlives the main one is
        not sampled after it: its row keeps what was sampled."""
        if self.sampler is not None:
            import threading

            self._stopping = threading.Thread(target=self._stop_sampler, name="gpuscope-sampler-stop", daemon=True)
            self._stopping.start()

    def _stop_sampler(self) -> None:
        """main_exited's thread: what the stop raises is raised again by program_ended, in the run's
        thread, where the run notes a recorder's failure."""
        try:
            self.sampler.stop()
        except Exception as exc:  # noqa: BLE001 - handed to program_ended
            self._stop_error = exc

    def program_ended(self, ctx: RunContext) -> None:
        if self._ended_first:
            ctx.notes.append(f"GPU telemetry off: {NOT_OPENED}")
        if self._stopping is not None:
            self._stopping.join()
        if self.sampler is not None:
            self.sampler.stop()   # idempotent: stopped when the main process ended
            gpu = self.sampler.gpu   # known once the sampler ran: the note comes with the run's end
            if not gpu.available and gpu.reason:
                ctx.notes.append(f"GPU telemetry off: {gpu.reason}")
        error, self._stop_error = self._stop_error, None
        if error is not None:
            raise error

    def finish(self, outcome: Outcome) -> None:
        if self.sampler is None:
            return
        from gpuscope.trace.process_row import sampled_from_summary
        from gpuscope.trace.process_rows import add_sampled

        self.sampler.stop()  # idempotent: stopped already when the program ended
        outcome.sampled = sampled_from_summary(self.sampler.process_summary())
        add_sampled(outcome.processes, outcome.sampled)
