"""Past runs from the store: a table with each run's arguments and disk use, refreshed off the GUI
thread. Select one or several (Ctrl/Shift+click, Ctrl+A) and act on them from the buttons or the
context menu: open a run to see it again, run it again with its settings (the launch panel is
filled with the run's RunSpec), compare runs, or delete them (after a confirmation)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QMenu, QMessageBox, QPushButton, QTableWidget,
                               QTableWidgetItem, QToolButton, QVBoxLayout, QWidget)

from gpuscope.app.remote.core import core, data_dir
from gpuscope.app import bridge, workers
from gpuscope.views.history import (COLUMNS, Entry, HistoryData, arguments, cells, entries, human, run_spec,
                                    series_cells, series_rows)
from gpuscope.views.series_index import SeriesEntry

RERUN_TEXT = "Run again with these settings"
SERIES_ROLE = Qt.ItemDataRole.UserRole + 1     # a series line's id (run lines hold their row index)


class PastRunBar(QFrame):
    """Above the launch panel while a past run is shown: the plots are that run's, the panel holds
    the settings of the NEXT run; one click loads the past run's settings into it."""

    sigLoad = Signal(str)       # the run id whose settings to load

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run_id: str | None = None
        self.setObjectName("pastRunBar")
        self.setStyleSheet("#pastRunBar { background: #e8f0fb; border: 1px solid #9bb7dd; border-radius: 3px; }")
        self.label = QLabel(wordWrap=True)
        self.load_button = QPushButton("Load this run's settings")
        self.load_button.setToolTip("Fill the launch panel with the script, arguments, interpreter, start method, "
                                    "launcher, nsys and annotate settings this run had")
        self.load_button.clicked.connect(lambda: self.run_id and self.sigLoad.emit(self.run_id))
        close = QToolButton()
        close.setText("×")
        close.setAutoRaise(True)
        close.setToolTip("Hide this note")
        close.clicked.connect(self.hide)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.label, 1)
        top.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.addLayout(top)
        lay.addWidget(self.load_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.hide()

    def show_run(self, row: Any) -> None:
        """Say that the plots show ``row`` while the panel below keeps the next run's settings."""
        self.run_id = row.id
        what = " ".join(x for x in (html.escape(Path(row.script).name), html.escape(arguments(row))) if x)
        self.label.setText(f"Showing past run <b>{html.escape(row.id)}</b> ({what} · {html.escape(row.launcher)} · "
                           f"{html.escape(row.start_method)}). The launch panel below holds the settings for the "
                           "<b>next</b> run, not this one's.")
        self.show()


class QtHistory(QWidget):
    """``sigOpenRun(row)`` when the user opens a run; ``sigRerun(spec, run_id)`` to fill the launch panel
    with a run's RunSpec; ``sigCompare(ids)`` to compare the selected runs; ``sigError(text)``;
    ``sigLoaded(n)``."""

    KEY_HELP_AREA = "History"

    sigOpenRun = Signal(object)
    sigRerun = Signal(object, str)
    sigCompare = Signal(list)
    sigError = Signal(str)
    sigLoaded = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        bridge.install()
        self.rows: list[Any] = []
        self.data = HistoryData([])
        self.lines: list[Entry] = []          # what each table row shows (a run, or a series)
        self.expanded: set[str] = set()       # the series shown with their runs
        self.task: workers.Task | None = None
        self.confirm_box: QMessageBox | None = None
        self._done_note = ""   # said after the refresh that follows a deletion
        # how to run the query: the main window passes its run_task (status bar busy bar + Cancel)
        self.runner: Any = None
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.doubleClicked.connect(self._open_selected)
        self.table.cellClicked.connect(self._cell_clicked)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.menu: QMenu | None = None
        self.past_bar = PastRunBar()           # the main window puts it above the launch panel
        self.past_bar.sigLoad.connect(self.rerun_id)
        self.open_button = QPushButton("Open run")
        self.open_button.setToolTip("Show the run's plots, console and findings (Run tab) and its timeline (Report)")
        self.open_button.clicked.connect(self._open_selected)
        self.rerun_button = QPushButton(RERUN_TEXT)
        self.rerun_button.setToolTip("Fill the launch panel with this run's settings (script or module, arguments, "
                                     "working dir, interpreter, start method, launcher, nsys, annotate) and show "
                                     "the Run tab; press Run to start it")
        self.rerun_button.clicked.connect(self.rerun_selected)
        self.compare_button = QPushButton("Compare")
        self.compare_button.setToolTip("Compare the selected runs side by side (runs that differ only by start "
                                       "method are grouped by it); Ctrl/Shift+click selects several")
        self.compare_button.clicked.connect(self.compare_selected)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.delete_button = QPushButton("Delete…")
        self.delete_button.setToolTip("Delete the selected runs: their folders (output, event logs, nsys report) "
                                      "and their rows in the store")
        self.delete_button.clicked.connect(self.ask_delete)
        self.delete_shortcut = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table)
        self.delete_shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)   # the table has focus
        self.delete_shortcut.setWhatsThis("delete the selected runs (asks first)")
        self.delete_shortcut.activated.connect(self.ask_delete)
        self.selection = QLabel()
        self.status = QLabel()
        self.footer = QLabel()
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bar = QHBoxLayout()
        bar.addWidget(self.open_button)
        bar.addWidget(self.rerun_button)
        bar.addWidget(self.compare_button)
        bar.addWidget(self.delete_button)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.selection)
        bar.addWidget(self.status, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.table)
        lay.addWidget(self.footer)
        self._selection_changed()

    def refresh(self) -> None:
        """Query the store on a pool thread; the table fills when it answers."""
        if self.task is not None:
            self.task.cancel()
        self.status.setText("loading…")
        if self.runner is not None:
            self.task = self.runner(lambda task: core().history(), self._fill, "reading the run history", self._error)
        else:
            self.task = workers.submit(lambda task: core().history(), on_done=self._fill, on_error=self._error,
                                       label="history")

    def _fill(self, data: HistoryData) -> None:
        self.task = None
        self.data = data
        self.rows = rows = data.rows
        self._show_lines()
        series = f", {len(data.series)} compare series" if data.series else ""
        self.status.setText(data.note or self._done_note or (f"{len(rows)} run(s){series}" if rows else
                                                             "no runs yet: run a script from the Run tab"))
        self._done_note = ""
        self._selection_changed()
        self.footer.setText(f"Disk: {human(data.runs_bytes)} in run folders, {human(data.store_bytes)} in the "
                            f"store ({data_dir()})")
        self.sigLoaded.emit(len(rows))

    def _show_lines(self) -> None:
        """The table's rows again from ``self.data`` and which series are expanded."""
        data = self.data
        self.table.setSortingEnabled(False)
        self.table.clearSelection()
        self.lines = entries(data, self.expanded)
        self.table.setRowCount(len(self.lines))
        for i, line in enumerate(self.lines):
            if line.series is not None:
                texts = series_cells(data, line.series, line.series.id in self.expanded)
            else:
                row = self.rows[line.row or 0]
                texts = cells(row, data.sizes.get(row.id), line.depth)
            for j, text in enumerate(texts):
                item = QTableWidgetItem(text)
                if j == 0:
                    item.setData(Qt.ItemDataRole.UserRole, line.row if line.series is None else -1)
                    if line.series is not None:
                        item.setData(SERIES_ROLE, line.series.id)
                        item.setToolTip("a start-method series: click ▸ to show its runs, double-click to "
                                        "reopen its comparison")
                if line.series is not None:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                elif COLUMNS[j] == "Arguments":
                    item.setToolTip(arguments(self.rows[line.row or 0]))
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()

    def _cell_clicked(self, row: int, column: int) -> None:
        line = self.lines[row] if 0 <= row < len(self.lines) else None
        if column == 0 and line is not None and line.series is not None:
            self.toggle_series(line.series.id)

    def toggle_series(self, series_id: str) -> None:
        """Show (or hide) the runs of a series under its line."""
        self.expanded ^= {series_id}
        self._show_lines()
        at = next((i for i, line in enumerate(self.lines) if line.series is not None and line.series.id == series_id),
                  None)
        if at is not None:
            self.table.selectRow(at)

    def series_at(self, table_row: int) -> SeriesEntry | None:
        line = self.lines[table_row] if 0 <= table_row < len(self.lines) else None
        return None if line is None else line.series

    def open_series(self, s: SeriesEntry) -> None:
        """Reopen a series' comparison (its runs compared again, grouped by start method)."""
        rows = series_rows(self.data, s)
        if len(rows) < 2:
            self.sigError.emit(f"series {s.id}: fewer than two of its runs are still in the history")
            return
        self.sigCompare.emit([r.id for r in rows])

    def _error(self, message: str) -> None:
        self.task = None
        self.status.setText("could not read the run history")
        self.sigError.emit(message)

    def _open_selected(self) -> None:
        selected = self.table.selectionModel().selectedRows()
        if not selected:
            return
        s = self.series_at(selected[0].row())
        if s is not None:
            self.open_series(s)
            return
        self.open_row(self.lines[selected[0].row()].row or 0)

    def open_row(self, index: int) -> None:
        self.sigOpenRun.emit(self.rows[index])

    # -- selection and its actions ------------------------------------------------------------------
    def _selection_changed(self) -> None:
        picked = self.table.selectionModel().selectedRows()
        n = len(picked)
        one_series = n == 1 and self.series_at(picked[0].row()) is not None
        self.open_button.setEnabled(n == 1)
        self.open_button.setText("Open comparison" if one_series else "Open run")
        self.rerun_button.setEnabled(n == 1)
        self.compare_button.setEnabled(n >= 2)
        self.delete_button.setEnabled(n >= 1)
        self.delete_button.setText(f"Delete {n}…" if n > 1 else "Delete…")
        self.selection.setText(f"{n} of {len(self.rows)} selected" if n else "")

    def _context_menu(self, pos: QPoint) -> None:
        row = self.table.rowAt(pos.y())
        first = self.table.item(row, 0) if row >= 0 else None
        if first is not None and not first.isSelected():
            self.table.selectRow(row)       # a right click outside the selection acts on that row
        self.menu = self.context_menu()
        self.menu.popup(self.table.viewport().mapToGlobal(pos))

    def context_menu(self) -> QMenu:
        """The actions on the current selection (the table's right-click menu)."""
        picked = self.table.selectionModel().selectedRows()
        n = len(picked)
        s = self.series_at(picked[0].row()) if n == 1 else None
        menu = QMenu(self)
        if s is not None:
            action = menu.addAction("Hide its runs" if s.id in self.expanded else "Show its runs")
            action.triggered.connect(lambda: self.toggle_series(s.id))
        for text, slot, enabled in (("Open comparison" if s is not None else "Open run", self._open_selected, n == 1),
                                    (RERUN_TEXT, self.rerun_selected, n == 1),
                                    (f"Compare {n} runs" if n >= 2 else "Compare", self.compare_selected, n >= 2),
                                    (f"Delete {n} run(s)…" if n else "Delete…", self.ask_delete, n >= 1)):
            action = menu.addAction(text)
            action.triggered.connect(slot)
            action.setEnabled(enabled)
        return menu

    def showing_past(self, run_id: str) -> None:
        """The Run tab now shows this past run: say so above the launch panel (the bar)."""
        row = next((r for r in self.rows if r.id == run_id), None)
        if row is not None:
            self.past_bar.show_run(row)

    def rerun_selected(self) -> None:
        rows = self.selected_rows()
        if rows and len(self.table.selectionModel().selectedRows()) == 1:
            rows = rows[:1]           # a series: its settings are its first run's (start method aside)
        if len(rows) != 1:
            self.status.setText("select one run to run again")
            return
        self.rerun_row(rows[0])

    def rerun_id(self, run_id: str) -> None:
        """The settings of a run this tab lists (the past-run bar's button)."""
        row = next((r for r in self.rows if r.id == run_id), None)
        if row is None:
            self.sigError.emit(f"run {run_id} is no longer in the history")
            return
        self.rerun_row(row)

    def rerun_row(self, row: Any) -> None:
        try:
            spec = run_spec(row)
        except (TypeError, ValueError) as exc:
            self.sigError.emit(f"run {row.id}: its stored settings cannot be read ({exc})")
            return
        self.sigRerun.emit(spec, row.id)

    def compare_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) < 2:
            self.status.setText("select two or more runs to compare (Ctrl/Shift+click)")
            return
        rows.sort(key=lambda r: r.started_ns or r.created_ns)     # oldest first: "before" vs "after"
        self.sigCompare.emit([r.id for r in rows])

    def selected_rows(self) -> list[Any]:
        """The runs selected: a series line stands for its runs."""
        picked = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        out: list[Any] = []
        for r in picked:
            line = self.lines[r]
            more = series_rows(self.data, line.series) if line.series is not None else [self.rows[line.row or 0]]
            out.extend(x for x in more if x not in out)
        return out

    def ask_delete(self) -> None:
        """Ask before deleting the selected runs (a running run is refused when deleting)."""
        rows = self.selected_rows()
        if not rows or self.task is not None:
            return
        total = sum(self.data.sizes.get(r.id, 0) for r in rows)
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete runs",
                          f"Delete {len(rows)} run(s) ({human(total)})?", QMessageBox.StandardButton.NoButton, self)
        shown = "".join(f"<li>{html.escape(r.id)} {html.escape(Path(r.script).name)}</li>" for r in rows[:12])
        more = f"<li>… and {len(rows) - 12} more</li>" if len(rows) > 12 else ""
        box.setInformativeText(f"<ul>{shown}{more}</ul>Their folders (output, event logs, nsys reports) and "
                               "their rows in the store are removed. This cannot be undone.")
        box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.finished.connect(lambda _: self._confirmed(box, [r.id for r in rows]))
        self.confirm_box = box
        box.open()

    def _confirmed(self, box: QMessageBox, ids: list[str]) -> None:
        self.confirm_box = None
        clicked = box.clickedButton()
        if clicked is None or box.buttonRole(clicked) != QMessageBox.ButtonRole.DestructiveRole:
            self.status.setText("nothing was deleted")
            return
        self.delete(ids)

    def delete(self, ids: list[str]) -> None:
        """Delete runs by id off the GUI thread, then refresh."""
        self.status.setText(f"deleting {len(ids)} run(s)…")
        self.task = workers.submit(lambda task: core().delete_runs(ids), on_done=self._deleted, on_error=self._error,
                                   label="deleting runs")

    def _deleted(self, result: tuple[int, int]) -> None:
        self.task = None
        self._done_note = f"deleted {result[0]} run(s), {human(result[1])} freed"
        self.refresh()
