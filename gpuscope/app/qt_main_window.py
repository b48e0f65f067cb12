"""The main window: the Run, Report, History, Cleanup and Compare tabs, menus and status bar. The
presenters (run session, compare session, report loader) do the work; the window lays them out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from PySide6.QtCore import QByteArray, QSettings, Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMessageBox

from gpuscope.app import bridge, workers
from gpuscope.app.attach.presenter import install as install_attach
from gpuscope.app.compare.qt_compare_session import CompareSession
from gpuscope.app.history.qt_history import QtHistory
from gpuscope.app.qt_help import build_help_menu
from gpuscope.app.remote.presenter import install as install_remote
from gpuscope.app.report.loader import ReportLoader, ask_job_folder, ask_report
from gpuscope.app.run.run_tab import RunTab
from gpuscope.app.run.session import RunSession
from gpuscope.app.settings import open_settings
from gpuscope.app.widgets.qt_status import QtStatus
from gpuscope.app.widgets.steady_tabs import LazyTabs
from gpuscope.views.live_model import LiveModel

if TYPE_CHECKING:
    from gpuscope.app.cleanup.qt_cleanup import QtCleanup
    from gpuscope.app.report.qt_report_view import QtReportView
    from gpuscope.fix import Fix
    from gpuscope.runs.supervisor import RunResult
    from gpuscope.spec import RunSpec
    from gpuscope.store.runs import RunRow


class MainWindow(QMainWindow):
    """Signals ``sigReportLoaded(report)`` once the report view shows a report the window loaded,
    ``sigReportFailed(text)``, ``sigErrorShown(text)`` (scripted mode and tests use them)."""

    sigReportLoaded = Signal(object)
    sigReportFailed = Signal(str)
    sigErrorShown = Signal(str)

    def __init__(self, settings: QSettings | None = None) -> None:
        super().__init__()
        bridge.install()
        self.setWindowTitle("gpuscope")
        self.settings = settings or open_settings()
        self.last_error: str | None = None
        self.show_dialogs = True
        self._build_menu()
        self._build()
        self._connect()
        self.attach, self.remote = install_attach(self), install_remote(self)   # File → Attach…, Connect…
        # last: after the menus other parts add (Compare, Take stacks)
        self.help_menu, self.keys_action, self.methods_action, self.about_action = build_help_menu(self)
        self.panel.load(self.settings)
        geometry = self.settings.value("window/geometry")
        self.restoreGeometry(geometry) if isinstance(geometry, QByteArray) else self.resize(1280, 800)

    # -- building -------------------------------------------------------------------------------
    def _build_menu(self) -> None:
        file_menu = self.file_menu = self.menuBar().addMenu("&File")
        self.open_action = file_menu.addAction("&Open report…", QKeySequence.StandardKey.Open,
                                               lambda: self._open_dialog(job=False))
        self.open_job_action = file_menu.addAction("Open &job…", lambda: self._open_dialog(job=True))
        file_menu.addAction("&Quit", QKeySequence.StandardKey.Quit, self.close)
        self.run_menu = self.menuBar().addMenu("&Run")
        self.run_action = self.run_menu.addAction("&Run", QKeySequence("Ctrl+R"), lambda: self.panel._on_run())
        self.stop_action = self.run_menu.addAction("&Stop", QKeySequence("Ctrl+."), self.stop_run)

    def _build(self) -> None:
        self.model = LiveModel()
        self.history = QtHistory()
        self.history.runner = self.run_task
        self.run_tab = RunTab(self.model, self.history.past_bar)
        t = self.run_tab
        self.panel, self.live, self.tree, self.console, self.stacks, self.bottom = (
            t.panel, t.live, t.tree, t.console, t.stacks, t.bottom)
        self.tabs = LazyTabs()
        self.tabs.addTab(t, "Run")
        # Report and Cleanup are built on first use (their imports cost start-up time)
        self._report_tab = self.tabs.add_lazy("Report", self._make_report_view)
        self.tabs.addTab(self.history, "History")
        self._cleanup_tab = self.tabs.add_lazy("Cleanup", self._make_cleanup)
        self.setCentralWidget(self.tabs)
        self.status = QtStatus(self.statusBar(), self.show_error)
        t.paint_own_backgrounds(self.tabs)
        self.statusBar().setAutoFillBackground(True)
        # the status bar's widgets, by the names tests and scripted mode use
        self.state_label, self.elapsed_label = self.status.state_label, self.status.elapsed_label
        self.progress, self.task_label = self.status.progress, self.status.task_label
        self.cancel_button = self.status.cancel_button
        self.session = s = RunSession(t, self.model, self.run_menu, self)
        self.controller, self.run_bridge, self.findings = s.controller, s.run_bridge, s.findings
        self.compare = CompareSession(self.session, self.tabs, self.history, self.file_menu, self.settings, self)
        self.reports = ReportLoader(lambda: self.report_view, self.status, self)

    def _connect(self) -> None:
        self.panel.sigRun.connect(self.start_run)
        self.panel.sigStop.connect(self.stop_run)
        self.panel.sigError.connect(self.show_error)
        for source in (self.session, self.compare, self.reports):
            source.sigStatus.connect(self.show_status)
            source.sigError.connect(self.show_error)
        for source in (self.session, self.compare):
            source.sigApplyFix.connect(self.apply_fix)
        s = self.session
        s.sigShowRun.connect(lambda: self.tabs.setCurrentWidget(self.run_tab))
        s.sigCleanup.connect(lambda: self.tabs.setCurrentWidget(self.cleanup))
        s.sigElapsed.connect(self.elapsed_label.setText)
        s.sigPastShown.connect(self.history.showing_past)
        s.sigRunEnded.connect(self._run_ended)
        s.sigProgramEnded.connect(lambda run_dir: self.load_report(run_dir, switch=False, quiet=True,
                                                                   events_only=True))
        self.reports.sigLoaded.connect(self.sigReportLoaded)
        self.reports.sigFailed.connect(self.sigReportFailed)
        self.reports.sigShow.connect(lambda: self.tabs.setCurrentWidget(self.report_view))
        self.history.sigOpenRun.connect(self.open_past_run)
        self.history.sigRerun.connect(self.load_run_settings)
        self.history.sigError.connect(self.show_error)
        self.tabs.currentChanged.connect(self._tab_changed)

    def _make_report_view(self) -> QtReportView:
        from gpuscope.app.report.qt_report_view import QtReportView

        view = QtReportView()
        view.sigFixRequested.connect(self.apply_fix)
        self.reports.attach(view)
        return view

    def _make_cleanup(self) -> QtCleanup:
        from gpuscope.app.cleanup.qt_cleanup import QtCleanup

        view = QtCleanup()
        view.sigCleaned.connect(lambda _r: self.session.left_running_changed(True, self.state_label.toolTip()))
        view.sigRefreshed.connect(lambda _r: self.session.left_running_changed(False, self.state_label.toolTip()))
        return view

    @property
    def report_view(self) -> QtReportView:
        """The Report tab, built on first use."""
        return cast("QtReportView", self.tabs.made(self._report_tab))

    @property
    def cleanup(self) -> QtCleanup:
        """The Cleanup tab, built on first use."""
        return cast("QtCleanup", self.tabs.made(self._cleanup_tab))

    last_result = property(lambda self: self.session.last_result)
    left_running = property(lambda self: self.session.left_running)
    roles = property(lambda self: self.session.roles)
    last_report = property(lambda self: self.reports.last_report, lambda self, v: self.reports.set_last(v))
    _report_pending = property(lambda self: self.reports.pending)

    # -- errors and status ----------------------------------------------------------------------
    def show_error(self, text: str) -> None:
        """A one-line message in the status bar and, unless scripted, a dialog; never a traceback."""
        self.last_error = text
        self.status.message(text, error=True)
        self.sigErrorShown.emit(text)
        if self.show_dialogs and self.isVisible():
            box = QMessageBox(QMessageBox.Icon.Warning, "gpuscope", text, QMessageBox.StandardButton.Ok, self)
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()

    def show_status(self, text: str) -> None:
        self.status.message(text)

    def run_task(self, fn: Callable[[workers.Task], Any], on_done: Callable[[Any], None], label: str,
                 on_error: Callable[[str], None] | None = None) -> workers.Task:
        """Run ``fn(task)`` off the GUI thread with the status bar's progress and Cancel."""
        return self.status.run_task(fn, on_done, label, on_error)

    # -- runs -----------------------------------------------------------------------------------
    def start_run(self, spec: RunSpec) -> None:
        if self.session.busy or self.compare.busy:
            self.show_error("a run is already in progress: stop it first")
            return
        self.panel.save(self.settings, ran=True)
        self.history.past_bar.hide()
        self.tabs.setCurrentWidget(self.run_tab)
        self.session.start(spec)

    def stop_run(self) -> None:
        self.session.stop()
        self.compare.stop()

    def tick(self) -> None:
        self.session.tick()

    def _run_ended(self, result: RunResult) -> None:
        if self.tabs.currentWidget() is self.history:   # else it reads the store when shown
            self.history.refresh()
        self.load_report(result.run_dir, switch=False, quiet=True)

    def _tab_changed(self, index: int) -> None:
        widget, key = self.tabs.widget(index), self.tabs.key_at(index)
        self.session.shown = widget is self.run_tab
        if key is self._report_tab:
            self.reports.shown()
        elif key is self._cleanup_tab:
            self.cleanup.refresh()
        elif widget is self.run_tab:
            self.session.tick()
        elif widget is self.history:
            self.history.refresh()

    # -- reports --------------------------------------------------------------------------------
    def _open_dialog(self, job: bool) -> None:
        path = ask_job_folder(self) if job else ask_report(self)
        if path:
            self.load_report(path, switch=True)

    def load_report(self, path: str | Path, switch: bool = True, quiet: bool = False,
                    events_only: bool = False) -> None:
        """Load a .nsys-rep / .sqlite / run folder off the GUI thread, then show it (ReportLoader.load)."""
        self.reports.load(path, switch=switch, quiet=quiet, events_only=events_only)

    def apply_fix(self, fix: Fix | None) -> None:
        """"Apply fix to next run" (Report tab, findings strip): set the launch panel, show the Run tab."""
        self.show_status(self.panel.apply_fix(fix))
        self.tabs.setCurrentWidget(self.run_tab)

    # -- history --------------------------------------------------------------------------------
    def open_past_run(self, row: RunRow) -> None:
        """Show a stored run's plots and console (Run tab) and its timeline (Report tab)."""
        if self.session.busy or self.compare.busy:
            self.show_error("a run is in progress: open past runs when it has ended")
            return
        self.session.open_past(row, self.status)
        self.load_report(row.run_dir, switch=False)   # an attached run: its profile's samples as lanes

    def load_run_settings(self, spec: RunSpec, run_id: str) -> None:
        """History's "Run again with these settings": the launch panel gets the run's RunSpec."""
        self.show_status(f"{self.panel.set_spec(spec)}, from run {run_id}: press Run to start it")
        self.history.past_bar.hide()
        self.tabs.setCurrentWidget(self.run_tab)

    # -- closing --------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        self.panel.save(self.settings)
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.sync()
        self.session.close()
        self.compare.stop()
        self.attach.close()
        self.status.cancel_tasks()
        workers.wait_all(20_000)
        super().closeEvent(event)
