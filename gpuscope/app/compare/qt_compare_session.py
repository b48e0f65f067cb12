"""Comparisons in the main window: the Compare tab, its menu item, and what a series shows while it runs.

The main window creates one :class:`CompareSession` beside the run session; it adds the Compare
tab (built on first use), File → Compare runs…, and connects the launch panel's "Compare start
methods" and History's Compare button. While a series runs, the Run tab's live plots, processes and console
follow the run in progress (reset at each run) and the status bar says "run 3 of 6: spawn,
repeat 2"; at the end the Compare tab shows the comparison.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import QObject, QSettings, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog, QMenu

from gpuscope.app.compare.compare_controller import CompareController, progress_text
from gpuscope.app.widgets.steady_tabs import LazyTabs
from gpuscope.views.procroles import RoleReader

if TYPE_CHECKING:
    from gpuscope.app.compare.qt_compare import QtCompareView
    from gpuscope.app.history.qt_history import QtHistory
    from gpuscope.app.run.session import RunSession
    from gpuscope.spec import RunSpec

TITLE = "Compare"


class CompareSession(QObject):
    """``sigShown(comparison)`` once the Compare tab shows a comparison, timelines included;
    ``sigStatus(text)``, ``sigError(text)``, ``sigApplyFix(fix)`` for the window."""

    sigShown = Signal(object)
    sigStatus = Signal(str)
    sigError = Signal(str)
    sigApplyFix = Signal(object)

    def __init__(self, run: RunSession, tabs: LazyTabs, history: QtHistory, file_menu: QMenu,
                 settings: QSettings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.run, self.tabs, self.history, self.settings = run, tabs, history, settings
        self.controller = CompareController(run.run_bridge, self)
        self.comparison: Any = None
        self._series_label = ""
        self._series = False       # the comparison in progress ran new runs (History must refresh)
        self.placeholder = tabs.add_lazy(TITLE, self._make_view)
        tabs.currentChanged.connect(self._tab_changed)
        self.action = QAction("&Compare runs…", file_menu)
        self.action.triggered.connect(self.ask_ids)
        file_menu.insertAction(file_menu.actions()[1], self.action)
        run.tab.panel.sigCompare.connect(self.start_series)
        history.sigCompare.connect(self.compare_ids)
        c = self.controller
        c.sigProgress.connect(self._progress)
        c.sigRunStarted.connect(self._run_started)
        c.sigComparison.connect(self._show)
        c.sigFailed.connect(self._failed)
        c.sigBusy.connect(self._busy)
        self._run_started_at = 0.0
        self._timer = QTimer(self, interval=200)
        self._timer.timeout.connect(self._tick)

    def _make_view(self) -> QtCompareView:
        from gpuscope.app.compare.qt_compare import QtCompareView

        view = QtCompareView()
        view.sigShown.connect(self._shown)
        view.sigError.connect(self.sigError)
        view.findings.sigApplyFix.connect(self.sigApplyFix)   # "Apply to next run" from a compared run
        return view

    @property
    def view(self) -> QtCompareView:
        """The Compare tab, built on first use."""
        return cast("QtCompareView", self.tabs.made(self.placeholder))

    def _tab_changed(self, index: int) -> None:
        if self.tabs.lazy_at(index) is self.placeholder:
            self.view    # noqa: B018 - builds the tab

    @property
    def busy(self) -> bool:
        return self.controller.busy

    # -- starting -------------------------------------------------------------------------------
    def start_series(self, spec: RunSpec, methods: list[str], repeat: int) -> None:
        """The launch panel's "Compare start methods": the same run under each method, alternated."""
        if self.busy or self.run.busy:
            self.sigError.emit("a run is already in progress: stop it first")
            return
        self.run.tab.panel.save(self.settings, ran=True)
        self.run.tab.console.clear()
        self._series = True
        self._series_label = f"{Path(spec.script or spec.module or '').name}: {' vs '.join(methods)}, ×{repeat}"
        self.view.show_busy(f"Comparing {self._series_label}…")
        self.tabs.setCurrentWidget(self.run.tab)
        self.controller.start_series(spec, methods, repeat)

    def compare_ids(self, ids: list[str]) -> None:
        """History → Compare, File → Compare runs…, ``gpuscope gui --compare``."""
        if self.busy:
            self.sigError.emit("a comparison is already in progress")
            return
        self._series = False
        self.view.show_busy(f"Comparing {', '.join(ids)}…")
        self.tabs.setCurrentWidget(self.view)
        self.sigStatus.emit(f"comparing {len(ids)} run(s)…")
        self.controller.compare_ids(ids)

    def ask_ids(self) -> None:
        """File → Compare runs…: run ids (or unique prefixes), History's selection filled in."""
        picked = " ".join(r.id for r in self.history.selected_rows())
        text, ok = QInputDialog.getText(self.tabs.window(), "Compare runs",
                                        "Run ids or unique prefixes (two or more, separated by spaces):",
                                        text=picked)
        if ok:
            ids = [t for t in re.split(r"[\s,]+", text) if t]
            if ids:
                self.compare_ids(ids)

    def stop(self) -> None:
        if self.busy:
            self.sigStatus.emit("stopping the series…")
            self.controller.stop()

    # -- while a series runs --------------------------------------------------------------------
    def _progress(self, i: int, n: int, method: str, repeat: int) -> None:
        text = progress_text(i, n, method, repeat)
        run = self.run
        run.run_bridge.drain_output()
        run.run_bridge.drain_batches()
        run.tab.live.reset(f"{self._series_label} · {text}")
        run.tab.tree.reset_rows()
        run.roles = None
        run.tab.console.append_text(f"gpuscope: {text}")
        self.sigStatus.emit(text)
        self.view.show_busy(f"Comparing {self._series_label}… {text}")

    def _run_started(self, run_id: str, run_dir: str, pid: int) -> None:
        self._run_started_at = time.monotonic()
        self.run.roles = RoleReader(Path(run_dir))
        live = self.run.tab.live
        live.title.setText(f"{live.title.text()} · run {run_id} · pid {pid}")

    def _tick(self) -> None:
        """The elapsed time of the run in progress (the window's tick follows single runs only)."""
        if self.busy and self._run_started_at:
            elapsed = time.monotonic() - self._run_started_at
            self.run.tab.live.set_elapsed(elapsed, "running")
            self.run.sigElapsed.emit(f"series: run {elapsed:.1f} s")

    def _busy(self, busy: bool) -> None:
        if busy:
            self._timer.start()
        else:
            self._timer.stop()
            self._run_started_at = 0.0
            self.run.sigElapsed.emit("")
        self.run.tab.panel.set_running(busy)
        self.run.tab.panel.set_comparing(busy)

    # -- the result -----------------------------------------------------------------------------
    def _show(self, comparison: Any) -> None:
        if not self.tabs.isVisible():        # the window was closed during the series
            return
        self.run.tick()
        self.comparison = comparison
        if self._series:
            self.history.refresh()
        self.tabs.setCurrentWidget(self.view)
        self.view.show_comparison(comparison)
        stopped = " (the series was stopped: only the runs that ended are compared)" if self.controller.stopped else ""
        self.sigStatus.emit(f"comparison: {comparison.verdict}{stopped}")

    def _shown(self, comparison: Any) -> None:
        self.sigShown.emit(comparison)

    def _failed(self, text: str) -> None:
        self.run.tick()
        if self._series:
            self.history.refresh()
        if self.controller.stopped:
            text = f"series stopped: {text}"
        if self.view.comparison is not None:       # the last comparison stays; the error is a line
            self.view.show_busy(self.view.comparison.verdict)
        else:
            self.view.show_busy(f"No comparison: {text}")
        self.sigError.emit(text)
