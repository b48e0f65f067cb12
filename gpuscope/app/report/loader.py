"""Loading a report for the Report tab: off the GUI thread, one at a time, with the run's own
event logs drawn first while nsys still writes its report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from gpuscope import paths
from gpuscope.app.remote.core import core, remote
from gpuscope.app import workers

if TYPE_CHECKING:
    from gpuscope.app.report.qt_report_view import QtReportView
    from gpuscope.app.widgets.qt_status import QtStatus
    from gpuscope.nsys.report import Report
REPORT_FILTER = "Reports (*.nsys-rep *.sqlite);;Nsight Systems reports (*.nsys-rep);;SQLite exports (*.sqlite)"


def report_start_dir() -> str:
    """Where File → Open report starts: the runs folder (each run's report is there)."""
    folder = paths.runs_dir()
    return str(folder if folder.is_dir() else Path.home())


def ask_report(parent: QWidget) -> str:
    """File → Open report…: the chosen file, or "" when cancelled."""
    return QFileDialog.getOpenFileName(parent, "Open a report", report_start_dir(), REPORT_FILTER)[0]


def ask_job_folder(parent: QWidget) -> str:
    """File → Open job…: a job folder of node runs, or "" when cancelled."""
    return QFileDialog.getExistingDirectory(parent, "Open a job folder (gpuscope run --job-dir)", str(Path.home()))


class ReportLoader(QObject):
    """Signals: ``sigLoaded(report)`` once the view shows a report this loaded, ``sigFailed(text)``,
    ``sigShow()`` (show the Report tab), ``sigStatus(text)``, ``sigError(text)``."""

    sigLoaded = Signal(object)
    sigFailed = Signal(str)
    sigShow = Signal()
    sigStatus = Signal(str)
    sigError = Signal(str)

    def __init__(self, view: Callable[[], QtReportView], status: QtStatus, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._view = view                  # the Report tab's view, built on first call
        self._status = status              # long steps show in the status bar, with Cancel
        self.last_report: Report | None = None
        self.pending: Report | None = None   # given to the view, not yet shown
        self._task: workers.Task | None = None
        self._fit_when_shown = False

    @property
    def idle(self) -> bool:
        """No report is being read."""
        return self._task is None

    def attach(self, view: QtReportView) -> None:
        """The Report tab's view, once built."""
        view.sigError.connect(self._view_failed)
        view.sigLoaded.connect(self._shown)

    def set_last(self, report: Report | None) -> None:
        self.last_report = report

    def load(self, path: str | Path, switch: bool = True, quiet: bool = False, events_only: bool = False) -> None:
        """Load a .nsys-rep / .sqlite / run folder off the GUI thread, then show it.

        ``quiet``: a failure is a status line, not an error (the report that follows a run: a run
        stopped before Python started has no timeline, which is no surprise). ``events_only``: a
        run folder's own event logs alone (while nsys is still finishing its report)."""
        from_run = Path(path).is_dir() if remote() is None else not str(path).endswith((".nsys-rep", ".sqlite"))

        def work(task: workers.Task) -> Report:
            task.progress(f"loading {Path(path).name}")
            return core().load_report(path, events_only=events_only)

        def done(report: Report) -> None:
            self._task = None
            if events_only:   # a stand-in until the run's report: not the run's last report
                self._view().show_report(report)
                return
            self.last_report = report
            if switch:
                self.sigShow.emit()
            if not from_run:
                self.sigStatus.emit(f"report loaded: {report.path}")
            self.pending = report
            self._view().show_report(report)   # lays out on a worker, then sigLoaded

        def failed(text: str) -> None:
            self._task = None
            if events_only:   # nothing drawn early; the run's report follows anyway
                return
            (self.sigStatus.emit(f"no timeline: {text}") if quiet else self.sigError.emit(text))
            self.sigFailed.emit(text)

        if self._task is not None:
            self._task.cancel()
            self._status.end_task(self._task)
        self._task = self._status.run_task(work, done, "loading report", on_error=failed)

    def shown(self) -> None:
        """The Report tab became the current tab: a timeline laid out while hidden is fitted now."""
        view = self._view()
        if self._fit_when_shown:
            self._fit_when_shown = False
            QTimer.singleShot(0, view.timeline.fit)   # after the tab has its size

    def _shown(self, report: Any) -> None:
        # laid out while its tab was hidden, the timeline fitted a zero-width view: fit it when shown
        self._fit_when_shown = not self._view().isVisible()
        if report is self.pending:
            self.pending = None
            self.sigLoaded.emit(report)

    def _view_failed(self, text: str) -> None:
        self.sigError.emit(text)
        if self.pending is not None:
            self.pending = None
            self.sigFailed.emit(text)
