"""Past runs from the store: a table with each run's arguments and disk use, refreshed off the GUI
thread. Select one or several (Ctrl/Shift+click, Ctrl+A) and act on them from the buttons or the
context menu: open a run to see it again, run it again with its settings (the launch panel is
filled with the run's RunSpec), compare runs, or delete them (after a confirmation)."""

from __future__ import annotations

import html
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QMenu, QMessageBox, QPushButton, QTableWidget,
                               QTableWidgetItem, QToolButton, QVBoxLayout, QWidget)

from gpuscope.app import bridge, workers

COLUMNS = ("Run", "Started", "Script", "Arguments", "Launcher", "Start method", "nsys", "Status", "Duration",
           "Disk")
ARGS_SHOWN = 60          # characters of the Arguments cell (the tooltip has them all)
RERUN_TEXT = "Run again with these settings"


@dataclass
class HistoryData:
    """What the History tab shows: runs, the disk each takes, the totals, a recovery note."""

    rows: list[Any]
    sizes: dict[str, int] = field(default_factory=dict)
    runs_bytes: int = 0
    store_bytes: int = 0
    note: str = ""


def _store_call(fn: Any) -> Any:
    """Run ``fn(conn)`` on the store; a store that cannot be read is a one-line UserError."""
    import sqlite3

    from gpuscope import paths
    from gpuscope.errors import UserError
    from gpuscope.store import db

    try:
        conn = db.connect()
        try:
            return fn(conn), conn.recovered
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"cannot read the run store {paths.store_path()}: {exc}") from None


def query_runs(limit: int = 200) -> HistoryData:
    """The newest runs and their disk use (a pool thread calls this)."""
    from gpuscope import paths
    from gpuscope.store import retention, runs

    rows, recovered = _store_call(lambda conn: runs.list_runs(conn, limit=limit))
    sizes = {r.id: retention.disk_usage(r.run_dir) for r in rows}
    note = recovered[-1].note(paths.store_path()) if recovered else ""
    return HistoryData(rows, sizes, retention.disk_usage(paths.runs_dir()), retention.store_usage(), note)


def delete_runs(ids: list[str]) -> tuple[int, int]:
    """Delete runs by id (a pool thread calls this); returns (runs deleted, bytes freed)."""
    from gpuscope.store import retention

    done, _ = _store_call(lambda conn: retention.delete(conn, retention.resolve(conn, ids)))
    return len(done), sum(d.freed for d in done)


def describe_status(row: Any) -> str:
    if row.status in ("exited", "failed") and row.signal:
        return f"{row.status} ({row.signal})"
    if row.status in ("exited", "failed") and row.exit_code not in (None, 0):
        return f"{row.status} (exit {row.exit_code})"
    return row.status


def arguments(row: Any) -> str:
    """The run's arguments as a shell would take them (what the launch panel's field holds)."""
    return shlex.join(str(a) for a in row.spec.get("args") or ())


def run_spec(row: Any) -> Any:
    """The RunSpec a stored run was launched with (its spec.json, as the store holds it)."""
    from gpuscope.spec import RunSpec

    return RunSpec.from_dict(row.spec)


def cells(row: Any, size: int | None = None) -> list[str]:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((row.started_ns or row.created_ns) / 1e9))
    launcher = row.launcher + (f" ×{row.spec.get('nproc')}" if row.launcher == "torchrun" else "")
    nsys = "yes" if (row.spec.get("nsys") or {}).get("enabled") else ""
    duration = "" if row.duration_s is None else f"{row.duration_s:.1f} s"
    disk = "" if size is None else human(size)
    args = arguments(row)
    args = args if len(args) <= ARGS_SHOWN else args[:ARGS_SHOWN - 1] + "…"
    return [row.id, started, Path(row.script).name, args, launcher, row.start_method, nsys, describe_status(row),
            duration, disk]


def human(n: int) -> str:
    from gpuscope.store.retention import human as fmt

    return fmt(n)


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
        close = QToolButton(text="×", autoRaise=True)
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
            self.task = self.runner(lambda task: query_runs(), self._fill, "reading the run history", self._error)
        else:
            self.task = workers.submit(lambda task: query_runs(), on_done=self._fill, on_error=self._error,
                                       label="history")

    def _fill(self, data: HistoryData) -> None:
        self.task = None
        self.data = data
        self.rows = rows = data.rows
        self.table.setSortingEnabled(False)
        self.table.clearSelection()
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, text in enumerate(cells(row, data.sizes.get(row.id))):
                item = QTableWidgetItem(text)
                if j == 0:
                    item.setData(Qt.ItemDataRole.UserRole, i)
                if COLUMNS[j] == "Arguments":
                    item.setToolTip(arguments(row))
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.status.setText(data.note or self._done_note or (f"{len(rows)} run(s)" if rows else
                                                             "no runs yet: run a script from the Run tab"))
        self._done_note = ""
        self._selection_changed()
        from gpuscope import paths

        self.footer.setText(f"Disk: {human(data.runs_bytes)} in run folders, {human(data.store_bytes)} in the "
                            f"store ({paths.data_dir()})")
        self.sigLoaded.emit(len(rows))

    def _error(self, message: str) -> None:
        self.task = None
        self.status.setText("could not read the run history")
        self.sigError.emit(message)

    def _open_selected(self) -> None:
        selected = self.table.selectionModel().selectedRows()
        if not selected:
            return
        index = self.table.item(selected[0].row(), 0).data(Qt.ItemDataRole.UserRole)
        self.open_row(index)

    def open_row(self, index: int) -> None:
        self.sigOpenRun.emit(self.rows[index])

    # -- selection and its actions ------------------------------------------------------------------
    def _selection_changed(self) -> None:
        n = len(self.table.selectionModel().selectedRows())
        self.open_button.setEnabled(n == 1)
        self.rerun_button.setEnabled(n == 1)
        self.compare_button.setEnabled(n >= 2)
        self.delete_button.setEnabled(n >= 1)
        self.delete_button.setText(f"Delete {n}…" if n > 1 else "Delete…")
        self.selection.setText(f"{n} of {len(self.rows)} selected" if n else "")

    def _context_menu(self, pos: QPoint) -> None:
        row = self.table.rowAt(pos.y())
        if row >= 0 and not self.table.item(row, 0).isSelected():
            self.table.selectRow(row)       # a right click outside the selection acts on that row
        self.menu = self.context_menu()
        self.menu.popup(self.table.viewport().mapToGlobal(pos))

    def context_menu(self) -> QMenu:
        """The actions on the current selection (the table's right-click menu)."""
        n = len(self.table.selectionModel().selectedRows())
        menu = QMenu(self)
        for text, slot, enabled in (("Open run", self._open_selected, n == 1),
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
        picked = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.rows[self.table.item(r, 0).data(Qt.ItemDataRole.UserRole)] for r in picked]

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
        self.task = workers.submit(lambda task: delete_runs(ids), on_done=self._deleted, on_error=self._error,
                                   label="deleting runs")

    def _deleted(self, result: tuple[int, int]) -> None:
        self.task = None
        self._done_note = f"deleted {result[0]} run(s), {human(result[1])} freed"
        self.refresh()
