"""The Run tab's presenter: one run (or a past run) shown in the launch panel, plots, processes,
console and stacks.

It owns the run controller, the run's stream (the bridge the core fills), the live model, the
processes' roles, the findings and the notes, and the 10 Hz tick that drains the stream into the
views. It never reaches into the main window: what the window must do (say something in the
status bar, show a tab, load the run's report) goes out as a signal.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMenu

from gpuscope.app.remote.core import core, remote
from gpuscope.app import workers
from gpuscope.app.bridge import RunBridge
from gpuscope.app.run.run_controller import IDLE, RunController
from gpuscope.app.run.run_findings import RunFindings
from gpuscope.status import RunStatus
from gpuscope.views.left_running import LeftRunning
from gpuscope.views.live_model import LiveModel
from gpuscope.views.procroles import RoleReader
from gpuscope.views.run_status import describe_result

if TYPE_CHECKING:
    from gpuscope.app.run.run_tab import RunTab
    from gpuscope.app.widgets.qt_status import QtStatus
    from gpuscope.runs.supervisor import Run, RunResult
    from gpuscope.spec import RunSpec
    from gpuscope.store.runs import RunRow
    from gpuscope.telemetry.ray_store import StoreTail
    from gpuscope.views.past_run import PastRun

TICK_MS = 100
STAGE_MS = 12   # after a tick, each plot and the process table redraw this far apart (one per turn)
ROLES_EVERY = 5  # ticks between two reads of the processes' roles and the Ray object store


class RunSession(QObject):
    """Signals: ``sigStatus(text)``, ``sigError(text)``, ``sigShowRun()``, ``sigCleanup()``,
    ``sigApplyFix(fix)``, ``sigElapsed(text)`` (the status bar's clock), ``sigRunEnded(result)``,
    ``sigProgramEnded(run_dir)`` (under nsys, before its report), ``sigPastShown(run_id)``."""

    sigStatus = Signal(str)
    sigError = Signal(str)
    sigShowRun = Signal()
    sigCleanup = Signal()
    sigApplyFix = Signal(object)
    sigElapsed = Signal(str)
    sigRunEnded = Signal(object)
    sigProgramEnded = Signal(object)
    sigPastShown = Signal(str)

    def __init__(self, tab: RunTab, model: LiveModel, run_menu: QMenu, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tab, self.model = tab, model
        self.run_bridge = RunBridge()
        self.controller = RunController(self.run_bridge, self)
        self.findings = RunFindings(tab, self.run_bridge, self.controller, model, run_menu, self)
        for mine, theirs in ((self.sigStatus, self.findings.sigStatus), (self.sigError, self.findings.sigError),
                             (self.sigShowRun, self.findings.sigShowRun), (self.sigCleanup, self.findings.sigCleanup),
                             (self.sigApplyFix, self.findings.sigApplyFix)):
            theirs.connect(mine)
        self.findings.sigStop.connect(self.stop)
        self.roles: RoleReader | None = None
        self.ray_store: StoreTail | None = None
        self.last_result: RunResult | None = None
        self.left_running: LeftRunning | None = None   # what the last run left running (Cleanup ends it)
        self.shown = True             # the Run tab is the current tab (redraws only then)
        self._ticks = 0
        self._notes_printed: set[str] = set()
        self._roles_task: workers.Task | None = None   # the processes' roles, being read
        self._steps: list[Callable[[], Any]] = []     # the tick's redraws still to do, one per STAGE_MS
        self._connect()
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self._timer_tick)
        self._stage_timer = QTimer(self, interval=STAGE_MS)
        self._stage_timer.timeout.connect(self._next_step)
        self.timer.start()
        workers.submit(lambda task: core().gpu_unavailable_reason(), on_done=self._gpu_probed, label="GPU check")

    def _connect(self) -> None:
        c = self.controller
        c.sigStarted.connect(self._run_started)
        c.sigEnded.connect(self._run_ended)
        c.sigProgramEnded.connect(self.sigProgramEnded)
        c.sigFailed.connect(self._run_failed)
        c.sigState.connect(self._state_changed)
        self.run_bridge.sigProgress.connect(self._progress_line)

    @property
    def busy(self) -> bool:
        return self.controller.busy

    # -- a run --------------------------------------------------------------------------------------
    def start(self, spec: RunSpec) -> None:
        self.reset_views(f"{Path(spec.script).name} · {spec.launcher} · {spec.start_method}", keep_legends=True)
        self.last_result = None
        self.left_running = None
        self.controller.start(spec)

    def reset_views(self, title: str, keep_legends: bool = False) -> None:
        """Empty plots, processes, console and findings for what is shown next."""
        self.run_bridge.drain_output()
        self.run_bridge.drain_batches()
        self.tab.live.reset(title, keep_legends=keep_legends)
        self.tab.tree.reset_rows()
        self.tab.console.clear()
        self._notes_printed.clear()
        self.findings.reset()
        self.roles = None

    def stop(self) -> None:
        self.controller.stop()

    def _state_changed(self, state: str) -> None:
        self.tab.panel.set_running(state != IDLE)
        if state != IDLE:
            self.sigStatus.emit(f"{state}…")

    def _progress_line(self, text: str) -> None:
        self.tab.console.append_text(f"gpuscope: {text}")
        self.sigStatus.emit(text)

    def _gpu_probed(self, reason: str | None) -> None:
        if not self.controller.busy and not self.model.batches:
            self.tab.live.set_gpu_reason(reason)

    def _print_notes(self, notes: list[str]) -> None:
        """The run's notes in the console, each once: the run's list at its start (no GPU, …) is
        also the head of the result's list at its end."""
        for note in notes:
            if note not in self._notes_printed:
                self._notes_printed.add(note)
                self.tab.console.append_text(f"gpuscope: {note}")

    def _run_started(self, run: Run) -> None:
        live = self.tab.live
        self.tab.console.set_log_folder(run.run_dir)      # where all of the output is (skip notes name it)
        host = remote()   # a remote run's event logs are read there
        self.roles = host.role_reader(run.run_dir) if host is not None else RoleReader(run.run_dir, events=run.events)
        self.findings.started(run)
        self.ray_store = core().ray_store_tail(run.run_dir)   # a Ray run's object store (docs/RAY.md)
        live.set_gpu_reason(self.controller.gpu_reason)
        live.title.setText(f"{live.title.text()} · run {run.run_id} · pid {run.pid}")
        self._print_notes(run.notes)
        self.sigStatus.emit(f"running {run.run_id} (pid {run.pid})")

    def _run_ended(self, result: RunResult) -> None:
        self._timer_tick()       # the last output now; the plots and table in the next turns
        self.last_result = result
        line = describe_result(result)
        # a remote run's pids are the host's: this machine's /proc cannot say whether they still run
        self.left_running = LeftRunning.of(result, line) if remote() is None else None
        self._print_notes(result.notes)
        self.tab.console.append_text(f"gpuscope: {line}")
        (self.sigError if result.status is RunStatus.ERROR else self.sigStatus).emit(line)
        self.tab.live.set_elapsed(self.controller.elapsed(), result.status)
        self.tab.live.notes.show_notes(result.notes)
        self.findings.ended(result)
        self.sigRunEnded.emit(result)

    def _run_failed(self, text: str) -> None:
        self._timer_tick()
        self.sigError.emit(text)

    def left_running_changed(self, cleaned: bool, shown_line: str) -> None:
        """The last run's "N process(es) still running (see Cleanup)" said again when that changed:
        after a clean-up, or on a listing while that line is still the one shown."""
        left = self.left_running
        if left is None or not (cleaned or shown_line == left.line):
            return
        if left.update() is not None:
            self.sigStatus.emit(left.line)
        if not left.alive:
            self.left_running = None

    # -- a past run -----------------------------------------------------------------------------------
    def open_past(self, row: RunRow, status: QtStatus) -> None:
        """Read a stored run off the GUI thread (in the status bar), then show it."""
        status.run_task(lambda task: core().open_past_run(row.id, row.run_dir, row.started_ns), self.show_past,
                        f"opening run {row.id}")

    def show_past(self, past: PastRun) -> None:
        """A stored run's plots, processes, console, findings and stacks."""
        live, console = self.tab.live, self.tab.console
        self.reset_views(f"run {past.run_id} (past run)")
        console.set_log_folder(past.run_dir)
        self.ray_store = None
        if past.series is not None:
            self.model.load_series(past.series, past.identities)
            live.set_gpu_reason(self.model.gpu_reason)
        self.model.add_ray_store(past.ray_store)
        live.set_whole_run()
        live.set_elapsed(self.model.last_t, "ran")
        for stream, cut in past.truncated.items():
            console.append_text(f"gpuscope: the first {cut:,} bytes of {stream} are only in the log file")
        console.append_chunks(past.output)
        console.flush()
        self.findings.show_past(past)
        self.sigShowRun.emit()
        live.refresh()
        self.tab.tree.refresh()
        self.sigStatus.emit(f"showing past run {past.run_id}" + ("" if past.series else " (no stored samples)"))
        self.sigPastShown.emit(past.run_id)

    # -- the refresh tick -----------------------------------------------------------------------------
    def tick(self) -> None:
        """Drain the stream into the model and console, then redraw what changed, all of it now
        (a tab change, tests; the timer's tick stages the redraws: ``_timer_tick``)."""
        self._drain(roles_now=True)
        if self.shown:
            self.tab.live.refresh()
            self.tab.tree.refresh()

    def _timer_tick(self) -> None:
        """The 10 Hz tick: drain the stream now; redraw each changed plot, then the process table,
        each in its own turn of the event loop, STAGE_MS apart. Qt paints what one turn made dirty
        at once: drawn together, the plots, the table and the console made one GUI stall of their sum."""
        self._drain()
        if not self.shown:
            return
        self._steps = [partial(self.tab.live.refresh_plot, name) for name in self.tab.live.stale_plots()]
        self._steps.append(self.tab.tree.refresh)
        if not self._stage_timer.isActive():   # one timer for all steps: each Qt call can wait for the GIL
            self._stage_timer.start()

    def _next_step(self) -> None:
        if not self._steps or not self.shown:   # a tab change redrew all of it already
            self._steps.clear()
            self._stage_timer.stop()
            return
        self._steps.pop(0)()
        if self._steps:
            self._stage_timer.start()     # the next one STAGE_MS after this one's work, not before
        else:
            self._stage_timer.stop()

    def _drain(self, roles_now: bool = False) -> None:
        """The stream's output, batches and findings into the console, model and strip; the clocks.
        Every few ticks, the processes' roles and the Ray object store, read from their files on a
        pool thread (``roles_now``: here, at once)."""
        self._ticks += 1
        chunks, dropped = self.run_bridge.drain_output()
        if chunks or dropped:
            self.tab.console.append_chunks(chunks, dropped)
        for batch in self.run_bridge.drain_batches():
            self.model.add(batch)
        roles, store = self.roles, self.ray_store
        if roles is not None and (roles_now or self._ticks % ROLES_EVERY == 0):
            if roles_now:     # (the object store's tail is read by one thread at a time)
                ray = store.read_new() if store is not None and self._roles_task is None else []
                self._roles_read(roles, (*roles.read(), ray))
            elif self._roles_task is None:
                self._roles_task = workers.submit(
                    lambda task: (*roles.read(), store.read_new() if store is not None else []),
                    on_done=partial(self._roles_done, roles), on_error=self._roles_failed, label="process roles")
        self.findings.tick(self._ticks)
        c = self.controller
        if c.busy:
            self.tab.live.set_elapsed(c.elapsed(), c.state)
            self.sigElapsed.emit(f"{c.state} {c.elapsed():.1f} s")
        elif c.started_at:
            self.sigElapsed.emit(f"last run {c.elapsed():.1f} s")

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
        self.sigError.emit(text)

    def close(self) -> None:
        """The window closes: stop the run and the timers."""
        if self.controller.busy:
            self.controller.stop()
        self.timer.stop()
        self._stage_timer.stop()
