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

from PySide6.QtGui import QAction, QKeySequence

from gpuscope.app import workers
from gpuscope.app.widgets.qt_findings import STACKS_CODE

if TYPE_CHECKING:
    from gpuscope.app.qt_main_window import MainWindow
    from gpuscope.finding import Finding

REFRESH_TICKS = 5        # the recorder's merged list is read every 5th tick (0.5 s) while a run runs


class RunFindings:
    """Wires a window's strip, process tree and stacks view to the findings of the shown run."""

    def __init__(self, window: "MainWindow") -> None:
        self.w = window
        self.run_id: str | None = None
        self.run_dir: str | None = None
        self.started_ns: int | None = None
        self.stacks_shown_for: str | None = None      # the run whose stuck stacks were shown already
        self._stacks_task: workers.Task | None = None
        strip = window.live.findings.view
        strip.sigApplyFix.connect(window.apply_fix)
        strip.sigStop.connect(window.stop_run)
        strip.sigCleanup.connect(self._cleanup)
        strip.sigStacks.connect(self.show_stacks_tab)
        window.tree.sigFindingClicked.connect(lambda code, pid: (window.live.findings.view.select(code, pid)))
        window.tree.sigShowStacks.connect(self.show_stacks_of)
        window.tree.sigMessage.connect(lambda text, error: (window.show_error if error else window.show_status)(text))
        window.stacks.sigTake.connect(self.take_stacks)
        # Run → Take stacks (Ctrl+Shift+T), beside Run and Stop
        run_menu = next((a.menu() for a in window.menuBar().actions() if a.text() == "&Run"), None)
        if run_menu is not None:
            self.stacks_action = QAction("Take &stacks", window, shortcut=QKeySequence("Ctrl+Shift+T"))
            self.stacks_action.setToolTip("the Python stack of every thread of every process of the running run")
            self.stacks_action.triggered.connect(self.take_stacks)
            run_menu.addAction(self.stacks_action)

    @property
    def findings(self) -> list["Finding"]:
        return self.w.live.findings.findings

    # -- the run's life -----------------------------------------------------------------------------
    def reset(self) -> None:
        self.run_id = self.run_dir = self.started_ns = None
        self.stacks_shown_for = None
        self.w.tree.set_findings([])
        self.w.stacks.clear()
        self.w.stacks.set_can_take(False)

    def started(self, run: Any) -> None:
        self.run_id, self.run_dir, self.started_ns = run.run_id, str(run.run_dir), run.started_ns
        self.w.tree.run_id = run.run_id
        self.w.live.findings.view.set_live(True)
        self.w.stacks.set_can_take(True)

    def tick(self, ticks: int) -> None:
        """Per GUI tick: new findings now, the merged list (grown counts) every few ticks."""
        new = self.w.run_bridge.drain_findings()
        if not (new or (self.w.controller.busy and ticks % REFRESH_TICKS == 0)):
            return
        self._show(self.w.controller.findings() or new)
        if any(f.code == STACKS_CODE for f in new) and self.stacks_shown_for != self.run_id:
            self.stacks_shown_for = self.run_id
            self._load_stacks(why="the run looked stuck", switch=True)

    def ended(self, result: Any) -> None:
        self.w.run_bridge.drain_findings()
        self.w.live.findings.view.set_live(False)
        self.w.stacks.set_can_take(False)
        self._show(list(result.findings))
        # the process table: each process's exit, CPU time and peak RSS as `gpuscope run` prints them
        self.w.model.set_process_rows(result.processes, result.left_running)
        self.w.tree.refresh()

    def show_past(self, past: Any) -> None:
        """A past run: its findings (as ``gpuscope findings`` lists them) and its last stacks."""
        self.run_id, self.run_dir, self.started_ns = past.run_id, str(past.run_dir), past.started_ns
        self.w.live.findings.view.set_live(False)
        self._show(past.findings)
        from gpuscope.views.live_model import read_process_rows

        rows, left = read_process_rows(past.run_dir)
        if rows:
            self.w.model.set_process_rows(rows, left)
        if past.stacks:
            taken, procs = past.stacks
            self.w.stacks.show_stacks(procs, taken, live=False)

    def _show(self, findings: list["Finding"]) -> None:
        self.w.live.findings.set_findings(findings, self.started_ns)
        self.w.tree.set_findings(findings)

    # -- actions ------------------------------------------------------------------------------------
    def _cleanup(self, _fix: Any) -> None:
        """CleanupPids / CleanupShm: the Cleanup tab lists them, with its confirmation."""
        self.w.tabs.setCurrentWidget(self.w.cleanup)

    def show_stacks_tab(self) -> None:
        self.w.tabs.setCurrentIndex(0)
        self.w.bottom.setCurrentWidget(self.w.stacks)
        if not self.w.stacks.processes and self.run_dir is not None:
            self._load_stacks(why="", switch=True)

    def show_stacks_of(self, pid: int) -> None:
        """Processes → Show stacks: the Stacks tab with this process's stacks selected, taken now
        while the run runs (or the last ones taken once it has ended)."""
        self.w.stacks.want_pid = pid
        if self.run_id is None or self.run_dir is None:
            self.w.show_status("no run to take stacks of")
            return
        if self.w.controller.busy:
            self._load_stacks(why=f"for pid {pid}", switch=True, take=True)
        elif self.w.stacks.processes:
            self.w.stacks.select_pid(pid)
            self.w.bottom.setCurrentWidget(self.w.stacks)
        else:
            self._load_stacks(why="", switch=True)

    def take_stacks(self) -> None:
        """"Take stacks now" (or Run → Take stacks): every live process of the run, on a worker (up
        to 5 s per dump); of a run that has ended, the last ones taken."""
        if self.run_id is None or self.run_dir is None:
            self.w.show_status("no run to take stacks of")
            return
        self._load_stacks(why="", switch=True, take=True)

    def _load_stacks(self, why: str, switch: bool, take: bool = False) -> None:
        from gpuscope.app.run.qt_stacks import take_stacks

        run_id, run_dir = self.run_id, self.run_dir
        if run_id is None or run_dir is None:
            return
        if self._stacks_task is not None:
            self._stacks_task.cancel()
        self.w.stacks.set_busy("taking the stacks of every process…" if take else "reading the stacks…")

        def work(task: workers.Task) -> Any:
            if take:
                return take_stacks(run_id, run_dir)
            from gpuscope.findings.stacks import load_latest

            taken, procs = load_latest(run_dir)
            return taken, False, procs

        def done(result: Any) -> None:
            self._stacks_task = None
            taken, live, procs = result
            self.w.stacks.set_can_take(self.w.controller.busy)
            if run_id != self.run_id:
                return
            if procs:
                self.w.stacks.show_stacks(procs, taken, live=live or self.w.controller.busy, why=why)
            else:
                self.w.stacks.clear()
            if switch:
                self.w.bottom.setCurrentWidget(self.w.stacks)

        def failed(text: str) -> None:
            self._stacks_task = None
            self.w.stacks.set_can_take(self.w.controller.busy)
            self.w.show_error(text)

        self._stacks_task = workers.submit(work, on_done=done, on_error=failed, label="stacks")
