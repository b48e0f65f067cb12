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

from gpuscope.app.remote.core import core
from gpuscope.app import bridge, workers
from gpuscope.app.bridge import RunBridge
from gpuscope.views.series_index import save_series

if TYPE_CHECKING:
    from gpuscope.spec import RunSpec


def progress_text(i: int, n: int, method: str, repeat: int) -> str:
    return core().series_progress_text(i, n, method, repeat)


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
    def start_series(self, spec: RunSpec, methods: list[str], repeat: int) -> None:
        if self.busy:
            raise RuntimeError("a comparison is already in progress")
        self.stopped, self.series, self.groups = False, None, None
        self._begin(lambda task: self._run_series(spec, list(methods), repeat), "compare start methods")

    def _run_series(self, spec: RunSpec, methods: list[str], repeat: int) -> Any:
        series, run = core().compare_series(
            spec, methods, repeat, self.bridge,
            started=lambda *a: bridge.to_gui(self.sigRunStarted.emit, *a),
            progress=lambda *a: bridge.to_gui(self.sigProgress.emit, *a))
        with self._lock:
            self.series = series
            if self.stopped:
                series.stop()
        try:
            return run()
        finally:
            self.groups = {label: list(ids) for label, ids in series.runs.items()}
            # History lists it as one entry; a remote host's agent records its own series there
            if sum(map(len, self.groups.values())) >= 2 and not getattr(series, "saved_there", False):
                save_series(self.groups, spec, methods, repeat)

    # -- recorded runs --------------------------------------------------------------------------
    def compare_ids(self, ids: list[str]) -> None:
        if self.busy:
            raise RuntimeError("a comparison is already in progress")
        self.stopped, self.series, self.groups = False, None, None
        self._begin(lambda task: core().compare_runs(list(ids)), "compare runs")

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
