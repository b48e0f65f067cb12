"""Comparisons from the GUI, with their blocking parts on a worker thread.

``start_series(spec, methods, repeat)`` runs :class:`gpuscope.runs.series.StartMethodSeries` (the
same script under each start method, alternated A B A B …) on a pool thread, each run with the
app's recorder so the live plots and console follow the run in progress, then computes the
comparison there (:func:`gpuscope.analysis.comparison.compare_runs`). ``compare_ids(ids)`` compares
recorded runs (:func:`~gpuscope.analysis.comparison.compare_recorded`). ``stop()`` ends the whole
series (the run in progress is stopped like the Stop button stops a run; no further run starts).
Signals arrive on the GUI thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from gpuscope.app import bridge, workers
from gpuscope.app.bridge import RunBridge
from gpuscope.runs.recorder import BaseRecorder

if TYPE_CHECKING:
    from gpuscope.runs.recorder import RunContext
    from gpuscope.spec import RunSpec
    from gpuscope.telemetry.batch import SampleBatch


class _SeriesRecorder(BaseRecorder):
    """The app's recorder on each run of a series: batches to the bridge, each start to the GUI."""

    name = "app"

    def __init__(self, run_bridge: RunBridge, on_started: Any) -> None:
        self._bridge = run_bridge
        self._on_started = on_started

    def started(self, ctx: "RunContext") -> None:
        bridge.to_gui(self._on_started, ctx.run_id, str(ctx.run_dir), ctx.pid)

    def on_batch(self, batch: "SampleBatch") -> None:
        self._bridge.on_batch(batch)


def progress_text(i: int, n: int, method: str, repeat: int) -> str:
    return f"run {i} of {n}: {method}, repeat {repeat}"


class CompareController(QObject):
    """Signals: ``sigProgress(i, n, method, repeat)`` before each run of a series,
    ``sigRunStarted(run_id, run_dir, pid)``, ``sigComparison(comparison)``, ``sigFailed(text)``,
    ``sigBusy(bool)``."""

    sigProgress = Signal(int, int, str, int)
    sigRunStarted = Signal(str, str, int)
    sigComparison = Signal(object)
    sigFailed = Signal(str)
    sigBusy = Signal(bool)

    def __init__(self, run_bridge: RunBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = run_bridge
        self.task: workers.Task | None = None
        self.series: Any = None
        self.stopped = False
        self.groups: dict[str, list[str]] | None = None
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return self.task is not None

    # -- a new series ---------------------------------------------------------------------------
    def start_series(self, spec: "RunSpec", methods: list[str], repeat: int) -> None:
        if self.busy:
            raise RuntimeError("a comparison is already in progress")
        self.stopped, self.series, self.groups = False, None, None
        self._begin(lambda task: self._run_series(spec, list(methods), repeat), "compare start methods")

    def _run_series(self, spec: "RunSpec", methods: list[str], repeat: int) -> Any:
        from gpuscope.analysis.comparison import compare_runs
        from gpuscope.runs.series import StartMethodSeries

        where = {"run": ""}     # "run 3 of 6: spawn, repeat 2", before each run's own progress lines

        def progress(i: int, n: int, method: str, rep: int) -> None:
            where["run"] = progress_text(i, n, method, rep)
            bridge.to_gui(self.sigProgress.emit, i, n, method, rep)

        series = StartMethodSeries(
            spec, methods, repeat, progress=progress,
            run_kwargs={"output": [self.bridge.on_output],
                        "progress": lambda line: self.bridge.on_progress(f"{where['run']} · {line}"),
                        "recorders": lambda: [_SeriesRecorder(self.bridge, self.sigRunStarted.emit)]})
        with self._lock:
            self.series = series
            if self.stopped:
                series.stop()
        groups = series.run()
        self.groups = groups
        return compare_runs(groups)

    # -- recorded runs --------------------------------------------------------------------------
    def compare_ids(self, ids: list[str]) -> None:
        if self.busy:
            raise RuntimeError("a comparison is already in progress")
        self.stopped, self.series, self.groups = False, None, None
        from gpuscope.analysis.comparison import compare_recorded

        self._begin(lambda task: compare_recorded(list(ids)), "compare runs")

    # -- common ---------------------------------------------------------------------------------
    def _begin(self, fn: Any, label: str) -> None:
        self.task = workers.submit(fn, on_done=self._done, on_error=self._failed, label=label)
        self.sigBusy.emit(True)

    def _done(self, comparison: Any) -> None:
        self.task = None
        self.sigBusy.emit(False)
        self.sigComparison.emit(comparison)

    def _failed(self, text: str) -> None:
        self.task = None
        self.sigBusy.emit(False)
        self.sigFailed.emit(text)

    def stop(self) -> None:
        """End the series: the run in progress stops (again: killed at once), no further run starts."""
        with self._lock:
            self.stopped = True
            series = self.series
        if series is not None:
            series.stop()

    def wait(self, timeout_s: float = 60.0) -> bool:
        """Until the series' thread is done (closing the window)."""
        task = self.task
        return task is None or task.finished.wait(timeout_s)
