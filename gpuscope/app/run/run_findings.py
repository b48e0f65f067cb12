"""The Run tab's assistant: the findings strip, the process rows' badges and the Stacks tab, fed
from the run (live), from its result (after), or from a past run's folder (History).

Live, the findings recorder's ``on_finding`` reaches the GUI thread through the bridge
(``RunBridge.on_finding``, drained on the tick); the strip then shows the recorder's merged list,
read again about twice a second, so a count that grows ("failed starts") is current. When
``no-progress`` ("looks stuck") arrives, the stacks the recorder saved with it are loaded and the
Stacks tab is shown. After the run the strip shows the run's final list (``RunResult.findings``);
a past run shows ``gpuscope findings``' list (:func:`gpuscope.findings.engine.analyse_run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from gpuscope.app.remote.core import core
from gpuscope.app import workers
from gpuscope.app.widgets.qt_findings import STACKS_CODE

if TYPE_CHECKING:
    from gpuscope.app.bridge import RunBridge
    from gpuscope.app.run.run_controller import RunController
    from gpuscope.app.run.run_tab import RunTab
    from gpuscope.finding import Finding
    from gpuscope.views.live_model import LiveModel

REFRESH_TICKS = 5        # the recorder's merged list is read every 5th tick (0.5 s) while a run runs


class RunFindings(QObject):
    """Wires the Run tab's strip, process tree and stacks view to the findings of the shown run.
    Asks its owner through signals: ``sigStatus(text)``, ``sigError(text)``, ``sigApplyFix(fix)``,
    ``sigStop()``, ``sigCleanup()`` (show the Cleanup tab), ``sigShowRun()`` (show the Run tab)."""

    sigStatus = Signal(str)
    sigError = Signal(str)
    sigApplyFix = Signal(object)
    sigStop = Signal()
    sigCleanup = Signal()
    sigShowRun = Signal()

    def __init__(self, tab: RunTab, run_bridge: RunBridge, controller: RunController, model: LiveModel,
                 run_menu: QMenu, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tab, self.bridge, self.controller, self.model = tab, run_bridge, controller, model
        self.run_id: str | None = None
        self.run_dir: str | None = None
        self.started_ns: int | None = None
        self.stacks_shown_for: str | None = None      # the run whose stuck stacks were shown already
        self._stacks_task: workers.Task | None = None
        strip = tab.live.findings.view
        strip.sigApplyFix.connect(self.sigApplyFix)
        strip.sigStop.connect(self.sigStop)
        strip.sigCleanup.connect(lambda _fix: self.sigCleanup.emit())   # the Cleanup tab lists them, confirms
        strip.sigStacks.connect(self.show_stacks_tab)
        tab.tree.sigFindingClicked.connect(lambda code, pid: (tab.live.findings.view.select(code, pid)))
        tab.tree.sigShowStacks.connect(self.show_stacks_of)
        tab.tree.sigMessage.connect(lambda text, error: (self.sigError if error else self.sigStatus).emit(text))
        tab.stacks.sigTake.connect(self.take_stacks)
        # Run → Take stacks (Ctrl+Shift+T), beside Run and Stop
        self.stacks_action = QAction("Take &stacks", run_menu)
        self.stacks_action.setShortcut(QKeySequence("Ctrl+Shift+T"))
        self.stacks_action.setToolTip("the Python stack of every thread of every process of the running run")
        self.stacks_action.triggered.connect(self.take_stacks)
        run_menu.addAction(self.stacks_action)

    @property
    def findings(self) -> list[Finding]:
        return self.tab.live.findings.findings

    # -- the run's life -----------------------------------------------------------------------------
    def reset(self) -> None:
        self.run_id = self.run_dir = self.started_ns = None
        self.stacks_shown_for = None
        self.tab.tree.set_findings([])
        self.tab.stacks.clear()
        self.tab.stacks.set_can_take(False)

    def started(self, run: Any) -> None:
        self.run_id, self.run_dir, self.started_ns = run.run_id, str(run.run_dir), run.started_ns
        self.tab.tree.run_id = run.run_id
        self.tab.live.findings.view.set_live(True)
        self.tab.stacks.set_can_take(True)

    def tick(self, ticks: int) -> None:
        """Per GUI tick: new findings now, the merged list (grown counts) every few ticks."""
        new = self.bridge.drain_findings()
        if not (new or (self.controller.busy and ticks % REFRESH_TICKS == 0)):
            return
        self._show(self.controller.findings() or new)
        if any(f.code == STACKS_CODE for f in new) and self.stacks_shown_for != self.run_id:
            self.stacks_shown_for = self.run_id
            self._load_stacks(why="the run looked stuck", switch=True)

    def ended(self, result: Any) -> None:
        self.bridge.drain_findings()
        self.tab.live.findings.view.set_live(False)
        self.tab.stacks.set_can_take(False)
        self._show(list(result.findings))
        # the process table: each process's exit, CPU time and peak RSS as `gpuscope run` prints them
        self.model.set_process_rows(result.processes, result.left_running)
        self.tab.tree.refresh()

    def show_past(self, past: Any) -> None:
        """A past run: its findings (as ``gpuscope findings`` lists them) and its last stacks."""
        self.run_id, self.run_dir, self.started_ns = past.run_id, str(past.run_dir), past.started_ns
        self.tab.live.findings.view.set_live(False)
        self._show(past.findings)
        rows, left = past.rows      # read with the rest by the core (a remote run's folder is not here)
        if rows:
            self.model.set_process_rows(rows, left)
        if past.stacks:
            taken, procs = past.stacks
            self.tab.stacks.show_stacks(procs, taken, live=False)

    def _show(self, findings: list[Finding]) -> None:
        self.tab.live.findings.set_findings(findings, self.started_ns)
        self.tab.tree.set_findings(findings)

    # -- actions ------------------------------------------------------------------------------------
    def show_stacks_tab(self) -> None:
        self.sigShowRun.emit()
        self.tab.bottom.setCurrentWidget(self.tab.stacks)
        if not self.tab.stacks.processes and self.run_dir is not None:
            self._load_stacks(why="", switch=True)

    def show_stacks_of(self, pid: int) -> None:
        """Processes → Show stacks: the Stacks tab with this process's stacks selected, taken now
        while the run runs (or the last ones taken once it has ended)."""
        self.tab.stacks.want_pid = pid
        if self.run_id is None or self.run_dir is None:
            self.sigStatus.emit("no run to take stacks of")
            return
        if self.controller.busy:
            self._load_stacks(why=f"for pid {pid}", switch=True, take=True)
        elif self.tab.stacks.processes:
            self.tab.stacks.select_pid(pid)
            self.tab.bottom.setCurrentWidget(self.tab.stacks)
        else:
            self._load_stacks(why="", switch=True)

    def take_stacks(self) -> None:
        """"Take stacks now" (or Run → Take stacks): every live process of the run, on a worker (up
        to 5 s per dump); of a run that has ended, the last ones taken."""
        if self.run_id is None or self.run_dir is None:
            self.sigStatus.emit("no run to take stacks of")
            return
        self._load_stacks(why="", switch=True, take=True)

    def _load_stacks(self, why: str, switch: bool, take: bool = False) -> None:
        run_id, run_dir = self.run_id, self.run_dir
        if run_id is None or run_dir is None:
            return
        if self._stacks_task is not None:
            self._stacks_task.cancel()
        stacks = self.tab.stacks
        stacks.set_busy("taking the stacks of every process…" if take else "reading the stacks…")

        def work(task: workers.Task) -> Any:
            if take:
                return core().take_stacks(run_id, run_dir)
            taken, procs = core().latest_stacks(run_dir)
            return taken, False, procs

        def done(result: Any) -> None:
            self._stacks_task = None
            taken, live, procs = result
            stacks.set_can_take(self.controller.busy)
            if run_id != self.run_id:
                return
            if procs:
                stacks.show_stacks(procs, taken, live=live or self.controller.busy, why=why)
            else:
                stacks.clear()
            if switch:
                self.tab.bottom.setCurrentWidget(stacks)

        def failed(text: str) -> None:
            self._stacks_task = None
            stacks.set_can_take(self.controller.busy)
            self.sigError.emit(text)

        self._stacks_task = workers.submit(work, on_done=done, on_error=failed, label="stacks")
