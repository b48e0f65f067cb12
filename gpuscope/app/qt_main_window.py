"""The main window: Run (launch panel, live plots, processes, console), Report, History, Cleanup."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from gpuscope.views.past_run import PastRun
    from gpuscope.app.cleanup.qt_cleanup import QtCleanup
    from gpuscope.app.report.qt_report_view import QtReportView
    from gpuscope.finding import Fix
    from gpuscope.nsys.report import Report
    from gpuscope.runs.supervisor import Run, RunResult
    from gpuscope.spec import RunSpec
    from gpuscope.store.runs import RunRow

from PySide6.QtCore import QByteArray, QEvent, QRect, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QImage, QKeySequence, QPainter
from PySide6.QtWidgets import (QFileDialog, QMainWindow, QMessageBox, QSizePolicy, QSplitter, QStackedWidget,
                               QStyle, QStyleOptionTabWidgetFrame, QTabWidget, QVBoxLayout, QWidget)

from gpuscope.app import bridge, workers
from gpuscope.app.bridge import RunBridge
from gpuscope.views.left_running import LeftRunning
from gpuscope.views.live_model import LiveModel
from gpuscope.views.procroles import RoleReader
from gpuscope.app.compare.qt_compare_session import CompareSession
from gpuscope.telemetry.ray_store import StoreTail
from gpuscope.app.run.qt_console import QtConsole
from gpuscope.app.history.qt_history import QtHistory
from gpuscope.app.run.qt_launch_panel import QtLaunchPanel
from gpuscope.app.run.qt_live_view import QtLiveView
from gpuscope.app.run.qt_process_tree import QtProcessTree
from gpuscope.app.run.qt_stacks import QtStacks
from gpuscope.app.widgets.qt_status import QtStatus
from gpuscope.app.run.run_controller import IDLE, RunController, probe_gpu
from gpuscope.views.run_status import describe_result
from gpuscope.app.run.run_findings import RunFindings
from gpuscope.app.settings import open_settings

TICK_MS = 100
STAGE_MS = 12   # after a tick, each plot and the process table redraw this far apart (one per turn)
REPORT_FILTER = "Reports (*.nsys-rep *.sqlite);;Nsight Systems reports (*.nsys-rep);;SQLite exports (*.sqlite)"


class SteadyTabs(QTabWidget):
    """A tab widget that lays itself out again only when its tab bar's or its pages' size hints
    changed. Qt asks every ancestor of a label to lay out again whenever the label's text changes
    (``QLayout::activate`` always ends in ``updateGeometry``), and a ``QTabWidget`` answers each
    request by repainting all of itself and asking its own parent: the console's line count and
    the run clock made the whole Run tab repaint several times a second (5-20 ms each)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._hints: tuple | None = None

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            stack, bar = self.findChild(QStackedWidget), self.tabBar()
            hints = (bar.sizeHint(), bar.minimumSizeHint(), bar.isVisibleTo(self),
                     stack.sizeHint() if stack else None, stack.minimumSizeHint() if stack else None)
            if hints == self._hints:
                return True        # nothing this widget lays out changed: no relayout, no repaint
            self._hints = hints
        return super().event(event)


def pane_color(tabs: QTabWidget) -> QColor:
    """The colour the style fills a tab widget's pane with (drawn once, the middle pixel)."""
    image = QImage(32, 32, QImage.Format.Format_ARGB32)
    image.fill(tabs.palette().window().color())
    option = QStyleOptionTabWidgetFrame()
    option.initFrom(tabs)
    option.rect = QRect(0, 0, 32, 32)
    painter = QPainter(image)
    tabs.style().drawPrimitive(QStyle.PrimitiveElement.PE_FrameTabWidget, option, painter, tabs)
    painter.end()
    return image.pixelColor(16, 16)


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
        self.run_bridge = RunBridge()
        self.controller = RunController(self.run_bridge, self)
        self.model = LiveModel()
        self.roles: RoleReader | None = None
        self.ray_store: StoreTail | None = None
        self.last_report: Report | None = None
        self.last_result: RunResult | None = None
        self.last_error: str | None = None
        self.left_running: LeftRunning | None = None   # what the last run left running (Cleanup ends it)
        self.show_dialogs = True
        self._report_task: workers.Task | None = None
        self._report_pending: Report | None = None
        self._fit_timeline = False
        self._ticks = 0
        self._notes_printed: set[str] = set()
        self._build()
        self._build_menu()
        self._connect()
        self.compare = CompareSession(self)   # the Compare tab, File → Compare runs…, its signals
        self._build_help()
        self.panel.load(self.settings)
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        else:
            self.resize(1280, 800)
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self._timer_tick)
        self._roles_task: workers.Task | None = None   # the processes' roles, being read
        self._steps: list[Callable[[], Any]] = []     # the tick's redraws still to do, one per STAGE_MS
        self._stage_timer = QTimer(self, interval=STAGE_MS)
        self._stage_timer.timeout.connect(self._next_step)
        self.timer.start()
        workers.submit(lambda task: probe_gpu(), on_done=self._gpu_probed, label="GPU check")

    # -- building -------------------------------------------------------------------------------
    def _build(self) -> None:
        self.panel = QtLaunchPanel()
        self.live = QtLiveView(self.model)
        self.tree = QtProcessTree(self.model)
        self.console = QtConsole()
        self.bottom = SteadyTabs()
        self.bottom.addTab(self.tree, "Processes")
        self.bottom.addTab(self.console, "Console")
        self.stacks = QtStacks()
        self.bottom.addTab(self.stacks, "Stacks")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.live)
        right.addWidget(self.bottom)
        right.setSizes([480, 280])
        self.history = QtHistory()
        self.history.runner = self.run_task
        left = QWidget()                  # a past run shown: its bar says the panel is the next run's
        left_lay = QVBoxLayout(left)
        left_lay.setContentsMargins(0, 0, 0, 0)
        left_lay.addWidget(self.history.past_bar)
        left_lay.addWidget(self.panel, 1)    # its fields scroll inside it; Run/Stop stay pinned below
        self.run_split = QSplitter(Qt.Orientation.Horizontal)
        self.run_split.addWidget(left)
        self.run_split.addWidget(right)
        self.run_split.setCollapsible(0, False)
        self.run_split.setSizes([400, 880])       # a smaller window shrinks both, the panel to its minimum
        self.tabs = SteadyTabs()
        self.tabs.addTab(self.run_split, "Run")
        # Report and Cleanup are built on first use (their imports cost ~0.2 s of start-up)
        self._lazy: dict[str, QWidget] = {}
        self.tabs.addTab(QWidget(), "Report")
        self.tabs.addTab(self.history, "History")
        self.tabs.addTab(QWidget(), "Cleanup")
        self.setCentralWidget(self.tabs)
        self.status = QtStatus(self.statusBar(), self.show_error)
        # The views whose text changes while a run runs (the clocks, the console's bar, the table's
        # rows) paint their own background: Qt repaints a transparent widget's parents under it, and
        # the tab widgets' and the window's style frames cost 5-15 ms a paint on a loaded machine.
        for view, tabs in ((self.live, self.tabs), (self.tree, self.bottom), (self.console, self.bottom),
                           (self.stacks, self.bottom), (self.statusBar(), None)):
            if tabs is not None:     # the colour the tabs' pane has under it now
                palette = view.palette()
                palette.setColor(view.backgroundRole(), pane_color(tabs))
                view.setPalette(palette)
            view.setAutoFillBackground(True)
        # the status bar's widgets, by the names tests and scripted mode use
        self.state_label, self.elapsed_label = self.status.state_label, self.status.elapsed_label
        self.progress, self.task_label = self.status.progress, self.status.task_label
        self.cancel_button = self.status.cancel_button

    def _build_menu(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = QAction("&Open report…", self, shortcut=QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self._open_report_dialog)
        file_menu.addAction(self.open_action)
        self.open_job_action = QAction("Open &job…", self)   # a job folder of node runs (docs/MULTINODE.md)
        self.open_job_action.triggered.connect(self._open_job_dialog)
        file_menu.addAction(self.open_job_action)
        quit_action = QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        run_menu = self.menuBar().addMenu("&Run")
        self.run_action = QAction("&Run", self, shortcut=QKeySequence("Ctrl+R"))
        self.stop_action = QAction("&Stop", self, shortcut=QKeySequence("Ctrl+."))
        for action, slot in ((self.run_action, self.panel._on_run), (self.stop_action, self.stop_run)):
            action.triggered.connect(slot)
            run_menu.addAction(action)

    def _build_help(self) -> None:
        from gpuscope.app.qt_help import build_help_menu

        build_help_menu(self)     # last: after the menus other parts add (Compare, Take stacks)

    def _connect(self) -> None:
        self.panel.sigRun.connect(self.start_run)
        self.panel.sigStop.connect(self.stop_run)
        self.panel.sigError.connect(self.show_error)
        self.controller.sigStarted.connect(self._run_started)
        self.controller.sigEnded.connect(self._run_ended)
        self.controller.sigProgramEnded.connect(self._program_ended)
        self.controller.sigFailed.connect(self._run_failed)
        self.controller.sigState.connect(self._state_changed)
        self.run_bridge.sigProgress.connect(self._progress_line)
        self.history.sigOpenRun.connect(self.open_past_run)
        self.history.sigRerun.connect(self.load_run_settings)
        self.history.sigError.connect(self.show_error)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.findings = RunFindings(self)     # the findings strip, row badges and Stacks tab

    def _tab_widget(self, title: str, make: Callable[[], QWidget]) -> QWidget:
        """The widget of a lazily built tab, built (and put in its tab) on first access."""
        widget = self._lazy.get(title)
        if widget is None:
            widget = self._lazy[title] = make()
            index = next(i for i in range(self.tabs.count()) if self.tabs.tabText(i) == title)
            current = self.tabs.currentIndex()
            self.tabs.blockSignals(True)
            old = self.tabs.widget(index)
            self.tabs.removeTab(index)
            self.tabs.insertTab(index, widget, title)
            self.tabs.setCurrentIndex(current)
            self.tabs.blockSignals(False)
            old.deleteLater()
        return widget

    @property
    def report_view(self) -> "QtReportView":
        """The Report tab, built on first use (its imports cost ~0.2 s of start-up)."""
        if "Report" in self._lazy:
            return self._lazy["Report"]  # type: ignore[return-value]
        from gpuscope.app.report.qt_report_view import QtReportView

        view = self._tab_widget("Report", QtReportView)
        # a long report path in its title must not set the window's minimum width (it goes down to
        # 700 px); the reportview branch sets the same policy in QtReportView itself
        view.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        view.sigError.connect(self._report_view_failed)
        view.sigLoaded.connect(self._report_shown)
        view.sigFixRequested.connect(self.apply_fix)
        return view

    @property
    def cleanup(self) -> "QtCleanup":
        """The Cleanup tab, built on first use."""
        if "Cleanup" in self._lazy:
            return self._lazy["Cleanup"]  # type: ignore[return-value]
        from gpuscope.app.cleanup.qt_cleanup import QtCleanup

        view = self._tab_widget("Cleanup", QtCleanup)
        view.sigCleaned.connect(lambda _r: self._left_running_changed(cleaned=True))
        view.sigRefreshed.connect(lambda _r: self._left_running_changed(cleaned=False))
        return view  # type: ignore[return-value]

    def _left_running_changed(self, cleaned: bool) -> None:
        """The last run's "N process(es) still running (see Cleanup)" said again when that changed:
        after a clean-up, or on a listing while that line is still the one shown."""
        left = self.left_running
        if left is None or not (cleaned or self.state_label.toolTip() == left.line):
            return
        if left.update() is not None:
            self.show_status(left.line)
        if not left.alive:
            self.left_running = None

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

    def _progress_line(self, text: str) -> None:
        self.console.append_text(f"gpuscope: {text}")
        self.show_status(text)

    def _state_changed(self, state: str) -> None:
        self.panel.set_running(state != IDLE)
        if state != IDLE:
            self.show_status(f"{state}…")

    # -- long tasks -----------------------------------------------------------------------------
    def run_task(self, fn: Callable[[workers.Task], Any], on_done: Callable[[Any], None], label: str,
                 on_error: Callable[[str], None] | None = None) -> workers.Task:
        """Run ``fn(task)`` off the GUI thread with the status bar's progress and Cancel."""
        return self.status.run_task(fn, on_done, label, on_error)

    def cancel_tasks(self) -> None:
        self.status.cancel_tasks()

    # -- runs -----------------------------------------------------------------------------------
    def start_run(self, spec: RunSpec) -> None:
        if self.controller.busy or self.compare.busy:
            self.show_error("a run is already in progress: stop it first")
            return
        self.panel.save(self.settings, ran=True)
        self.run_bridge.drain_output()
        self.run_bridge.drain_batches()
        self.live.reset(f"{Path(spec.script).name} · {spec.launcher} · {spec.start_method}", keep_legends=True)
        self.tree.reset_rows()
        self.console.clear()
        self._notes_printed.clear()
        self.findings.reset()
        self.roles = None
        self.last_result = None
        self.left_running = None
        self.history.past_bar.hide()
        self.tabs.setCurrentIndex(0)
        self.controller.start(spec)

    def stop_run(self) -> None:
        self.controller.stop()
        self.compare.stop()

    def _gpu_probed(self, reason: str | None) -> None:
        if not self.controller.busy and not self.model.batches:
            self.live.set_gpu_reason(reason)

    def _print_notes(self, notes: list[str]) -> None:
        """The run's notes in the console, each once: the run's list at its start (no GPU, …) is
        also the head of the result's list at its end."""
        for note in notes:
            if note not in self._notes_printed:
                self._notes_printed.add(note)
                self.console.append_text(f"gpuscope: {note}")

    def _run_started(self, run: Run) -> None:
        self.console.set_log_folder(run.run_dir)      # where all of the output is (skip notes name it)
        self.roles = RoleReader(run.run_dir)
        self.findings.started(run)
        self.ray_store = StoreTail(run.run_dir)   # a Ray run's object store (docs/RAY.md)
        self.live.set_gpu_reason(self.controller.gpu_reason)
        self.live.title.setText(f"{self.live.title.text()} · run {run.run_id} · pid {run.pid}")
        self._print_notes(run.notes)
        self.show_status(f"running {run.run_id} (pid {run.pid})")

    def _run_ended(self, result: RunResult) -> None:
        self._timer_tick()       # the last output now; the plots and table in the next turns
        self.last_result = result
        line = describe_result(result)
        self.left_running = LeftRunning.of(result, line)
        self._print_notes(result.notes)
        self.console.append_text(f"gpuscope: {line}")
        (self.show_error if result.status == "error" else self.show_status)(line)
        self.live.set_elapsed(self.controller.elapsed(), result.status)
        self.live.notes.show_notes(result.notes)
        self.findings.ended(result)
        if self.tabs.currentWidget() is self.history:   # else it reads the store when shown
            self.history.refresh()
        self.load_report(result.run_dir, switch=False, quiet=True)

    def _program_ended(self, run_dir) -> None:
        """Under nsys: the run's own event logs drawn now; nsys's report replaces them when ready."""
        self.load_report(run_dir, switch=False, quiet=True, events_only=True)

    def _run_failed(self, text: str) -> None:
        self._timer_tick()
        self.show_error(text)

    # -- the refresh tick -----------------------------------------------------------------------
    def tick(self) -> None:
        """Drain the bridge into the model and console, then redraw what changed, all of it now
        (a tab change, tests; the timer's tick stages the redraws: ``_timer_tick``)."""
        self._drain(roles_now=True)
        if self.tabs.currentIndex() == 0:
            self.live.refresh()
            self.tree.refresh()

    def _timer_tick(self) -> None:
        """The 10 Hz tick: drain the bridge now; redraw each changed plot, then the process table,
        each in its own turn of the event loop, STAGE_MS apart. Qt paints what one turn made dirty
        at once, and a plot's repaint is the largest part of a tick: drawn together, the four plots,
        the table and the console made one GUI-thread stall of their sum (issue 16.1)."""
        self._drain()
        if self.tabs.currentIndex() != 0:
            return
        self._steps = [partial(self.live.refresh_plot, name) for name in self.live.stale_plots()]
        self._steps.append(self.tree.refresh)
        if not self._stage_timer.isActive():   # one timer for all steps: each Qt call can wait for the GIL
            self._stage_timer.start()

    def _next_step(self) -> None:
        if not self._steps or self.tabs.currentIndex() != 0:   # a tab change redrew all of it already
            self._steps.clear()
            self._stage_timer.stop()
            return
        step = self._steps.pop(0)
        step()
        if self._steps:
            self._stage_timer.start()     # the next one STAGE_MS after this one's work, not before
        else:
            self._stage_timer.stop()

    def _drain(self, roles_now: bool = False) -> None:
        """The bridge's output, batches and findings into the console, model and strip; the clocks.
        Every 5th tick, the processes' roles and the Ray object store, read from their files on a
        pool thread (``roles_now``: here, at once)."""
        self._ticks += 1
        chunks, dropped = self.run_bridge.drain_output()
        if chunks or dropped:
            self.console.append_chunks(chunks, dropped)
        for batch in self.run_bridge.drain_batches():
            self.model.add(batch)
        roles, store = self.roles, self.ray_store
        if roles is not None and (roles_now or self._ticks % 5 == 0):
            if roles_now:     # (the object store's tail is read by one thread at a time)
                ray = store.read_new() if store is not None and self._roles_task is None else []
                self._roles_read(roles, (*roles.read(), ray))
            elif self._roles_task is None:
                self._roles_task = workers.submit(
                    lambda task: (*roles.read(), store.read_new() if store is not None else []),
                    on_done=partial(self._roles_done, roles), on_error=self._roles_failed, label="process roles")
        self.findings.tick(self._ticks)
        if self.controller.busy:
            elapsed = self.controller.elapsed()
            self.live.set_elapsed(elapsed, self.controller.state)
            self.elapsed_label.setText(f"{self.controller.state} {elapsed:.1f} s")
        elif self.controller.started_at:
            self.elapsed_label.setText(f"last run {self.controller.elapsed():.1f} s")

    def _roles_done(self, roles: RoleReader, read: tuple) -> None:
        self._roles_task = None
        self._roles_read(roles, read)

    def _roles_read(self, roles: RoleReader, read: tuple) -> None:
        if roles is self.roles:     # still this run's (a new run has its own reader)
            identities, exits, ray = read
            self.model.set_identities(identities, exits)
            if self.ray_store is not None:
                self.model.add_ray_store(ray)

    def _roles_failed(self, text: str) -> None:
        self._roles_task = None
        self.show_error(text)

    def _tab_changed(self, index: int) -> None:
        title = self.tabs.tabText(index)
        if title == "Report" and "Report" not in self._lazy:
            self.report_view      # noqa: B018 - builds the tab
        if title == "Report" and self._fit_timeline:
            self._fit_timeline = False
            QTimer.singleShot(0, self.report_view.timeline.fit)   # after the tab has its size
        if index == 0:
            self.tick()
        elif self.tabs.widget(index) is self.history:
            self.history.refresh()
        elif title == "Cleanup":
            self.cleanup.refresh()

    # -- reports --------------------------------------------------------------------------------
    def report_start_dir(self) -> str:
        """Where File → Open report / Open job start: the runs folder (each run's report is there)."""
        from gpuscope.paths import runs_dir

        folder = runs_dir()
        return str(folder if folder.is_dir() else Path.home())

    def _open_report_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a report", self.report_start_dir(), REPORT_FILTER)
        if path:
            self.load_report(path, switch=True)

    def _open_job_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a job folder (gpuscope run --job-dir)", str(Path.home()))
        if path:
            self.load_report(path, switch=True)

    def load_report(self, path: str | Path, switch: bool = True, quiet: bool = False,
                    events_only: bool = False) -> None:
        """Load a .nsys-rep / .sqlite / run folder off the GUI thread, then show it.

        ``quiet``: a failure is a status line, not a dialog (the report that follows a run: a run
        stopped before Python started has no timeline, which is no surprise). ``events_only``: a
        run folder's own event logs alone (while nsys is still finishing its report)."""
        from_run = Path(path).is_dir()

        def work(task: workers.Task) -> Report:
            from gpuscope.nsys import report as nsys_report

            task.progress(f"loading {Path(path).name}")
            if events_only:
                return nsys_report.load_events(path, note=nsys_report.PENDING_NOTE)
            return nsys_report.load_report(path)

        def done(report: Report) -> None:
            self._report_task = None
            if events_only:   # a stand-in until the run's report: not the run's last report
                self.report_view.show_report(report)
                return
            self.last_report = report
            if switch:
                self.tabs.setCurrentWidget(self.report_view)
            if not from_run:
                self.show_status(f"report loaded: {report.path}")
            self._report_pending = report
            self.report_view.show_report(report)   # lays out on a worker, then sigLoaded

        def failed(text: str) -> None:
            self._report_task = None
            if events_only:   # nothing drawn early; the run's report follows anyway
                return
            if quiet:
                self.show_status(f"no timeline: {text}")
            else:
                self.show_error(text)
            self.sigReportFailed.emit(text)

        if self._report_task is not None:
            self._report_task.cancel()
            self.status.end_task(self._report_task)
        self._report_task = self.run_task(work, done, "loading report", on_error=failed)

    def _report_shown(self, report: Report) -> None:
        # laid out while its tab was hidden, the timeline fitted a zero-width view: fit it when shown
        self._fit_timeline = not self.report_view.isVisible()
        if report is self._report_pending:
            self._report_pending = None
            self.sigReportLoaded.emit(report)

    def apply_fix(self, fix: "Fix | None") -> None:
        """"Apply fix to next run" (Report tab, findings strip): set the launch panel, show the Run tab."""
        self.show_status(self.panel.apply_fix(fix))
        self.tabs.setCurrentIndex(0)

    def _report_view_failed(self, text: str) -> None:
        self.show_error(text)
        if self._report_pending is not None:
            self._report_pending = None
            self.sigReportFailed.emit(text)

    # -- history --------------------------------------------------------------------------------
    def open_past_run(self, row: RunRow) -> None:
        """Show a stored run's plots and console (Run tab) and its timeline (Report tab)."""
        if self.controller.busy or self.compare.busy:
            self.show_error("a run is in progress: open past runs when it has ended")
            return
        from gpuscope.views.past_run import load_past_run

        self.run_task(lambda task: load_past_run(row.id, row.run_dir, row.started_ns), self._show_past_run,
                      f"opening run {row.id}")
        self.load_report(row.run_dir, switch=False)

    def _show_past_run(self, past: PastRun) -> None:
        self.live.reset(f"run {past.run_id} (past run)")
        self.tree.reset_rows()
        self.console.clear()
        self.console.set_log_folder(past.run_dir)
        self.findings.reset()
        self.roles = None
        self.ray_store = None
        if past.series is not None:
            self.model.load_series(past.series, past.identities)
            self.live.set_gpu_reason(self.model.gpu_reason)
        self.model.add_ray_store(past.ray_store)
        self.live.set_whole_run()
        self.live.set_elapsed(self.model.last_t, "ran")
        for stream, cut in past.truncated.items():
            self.console.append_text(f"gpuscope: the first {cut:,} bytes of {stream} are only in the log file")
        self.console.append_chunks(past.output)
        self.console.flush()
        self.findings.show_past(past)
        self.tabs.setCurrentIndex(0)
        self.live.refresh()
        self.tree.refresh()
        self.show_status(f"showing past run {past.run_id}" + ("" if past.series else " (no stored samples)"))
        self.history.showing_past(past.run_id)

    def load_run_settings(self, spec: RunSpec, run_id: str) -> None:
        """History's "Run again with these settings": the launch panel gets the run's RunSpec."""
        self.show_status(f"{self.panel.set_spec(spec)}, from run {run_id}: press Run to start it")
        self.history.past_bar.hide()
        self.tabs.setCurrentIndex(0)

    # -- closing --------------------------------------------------------------------------------
    def closeEvent(self, event) -> None:
        self.panel.save(self.settings)
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.sync()
        if self.controller.busy:
            self.controller.stop()
        self.compare.stop()
        self.cancel_tasks()
        self.timer.stop()
        self._stage_timer.stop()
        workers.wait_all(20_000)
        super().closeEvent(event)
