"""Start, watch and stop one run from the GUI, with its blocking parts on a worker thread.

``start(spec)`` starts the run on a pool thread through :func:`gpuscope.api.start_run`, its
output, telemetry batches and new findings going to the bridge (a run stream), then blocks in
``Run.wait``. Signals arrive on the GUI thread.
``stop()`` may be called at any time, even while the run is still starting.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from gpuscope.app import bridge, workers
from gpuscope.app.remote.core import core
from gpuscope.app.bridge import RunBridge
from gpuscope.spec import RunSpec

if TYPE_CHECKING:

    from gpuscope.runs.supervisor import Run, RunResult

IDLE, STARTING, RUNNING, STOPPING = "idle", "starting", "running", "stopping"


class RunController(QObject):
    """Signals: ``sigStarted(run)``, ``sigEnded(result)``, ``sigFailed(text)``, ``sigState(str)``,
    ``sigProgramEnded(run_dir)``: under nsys, the program has ended (its main process wrote its
    exit record) while nsys still writes, imports and exports its report."""

    sigStarted = Signal(object)
    sigProgramEnded = Signal(object)
    sigEnded = Signal(object)
    sigFailed = Signal(str)
    sigState = Signal(str)

    def __init__(self, run_bridge: RunBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = run_bridge
        self.state = IDLE
        self.run: Run | None = None
        self.gpu_reason: str | None = None
        self.started_at = 0.0
        self.ended_at = 0.0
        self.duration: float | None = None     # the run's own, from its start and end times
        self._lock = threading.Lock()
        self._stop_wanted = False
        self.task: workers.Task | None = None

    def _set_state(self, state: str) -> None:
        self.state = state
        self.sigState.emit(state)

    @property
    def busy(self) -> bool:
        return self.state != IDLE

    def findings(self) -> list:
        """The run's findings so far (merged: a count that grew shows its new value)."""
        run = self.run
        return core().live_findings(run) if run is not None else []

    def elapsed(self) -> float:
        """Seconds of the run: since its program started (since Run was pressed while it starts);
        once ended, its real duration (its start and end times), not when the GUI heard of it."""
        if not self.started_at:
            return 0.0
        if not self.busy and self.duration is not None:
            return self.duration
        run = self.run
        if self.state in (RUNNING, STOPPING) and run is not None and run.started_ns:
            return max(0.0, (time.time_ns() - run.started_ns) / 1e9)
        return (time.monotonic() if self.busy else self.ended_at) - self.started_at

    # -- start ----------------------------------------------------------------------------------
    def start(self, spec: RunSpec) -> None:
        if self.busy:
            raise RuntimeError("a run is already in progress")
        self._stop_wanted = False
        self.run, self.gpu_reason = None, None
        self.started_at, self.ended_at, self.duration = time.monotonic(), 0.0, None
        self._set_state(STARTING)
        self.task = workers.submit(lambda task: self._work(spec), on_done=self._ended,
                                   on_error=self._failed, label="run")

    def adopt(self, run: Any) -> None:
        """Follow a run started before (a remote host's run, re-attached after a dropped connection)."""
        if self.busy:
            raise RuntimeError("a run is already in progress")
        self._stop_wanted = False
        self.run, self.gpu_reason = run, None
        self.started_at, self.ended_at, self.duration = time.monotonic(), 0.0, None
        self._set_state(STARTING)
        bridge.to_gui(self._started, run)
        self.task = workers.submit(lambda task: run.wait(), on_done=self._ended, on_error=self._failed,
                                   label="run")

    def _work(self, spec: RunSpec) -> RunResult:
        run = core().start_run(spec, self.bridge)
        self.gpu_reason = core().gpu_unavailable_reason(run)
        with self._lock:
            self.run = run
            stop_now = self._stop_wanted
        bridge.to_gui(self._started, run)
        if stop_now:
            run.stop()
        if spec.nsys.enabled and run.events is not None:
            # under nsys the GUI hears the program's end (its first process's exit record, as the
            # run's event-log reader reads it) before nsys has finished
            run_dir = run.run_dir
            run.events.on_first_exit(lambda: bridge.to_gui(self.sigProgramEnded.emit, run_dir))
        return run.wait()

    def _started(self, run: "Run") -> None:
        self._set_state(STOPPING if self._stop_wanted else RUNNING)
        self.sigStarted.emit(run)

    def _ended(self, result: "RunResult") -> None:
        self.ended_at = time.monotonic()
        if result.started_ns and result.ended_ns:
            self.duration = max(0.0, (result.ended_ns - result.started_ns) / 1e9)
        self._set_state(IDLE)
        self.sigEnded.emit(result)

    def _failed(self, message: str) -> None:
        self.ended_at = time.monotonic()
        self._set_state(IDLE)
        self.sigFailed.emit(message)

    # -- stop -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGINT → SIGTERM → SIGKILL to the whole tree (a second Stop kills at once)."""
        with self._lock:
            self._stop_wanted = True
            run = self.run
        if self.state in (RUNNING, STOPPING) and run is not None:
            self._set_state(STOPPING)
            run.stop()
