"""Past runs from the store: a table with each run's disk use, refreshed off the GUI thread; open a
run to see it again, or delete the selected runs (after a confirmation)."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QMessageBox, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from gpuscope.app import bridge, workers

COLUMNS = ("Run", "Started", "Script", "Launcher", "Start method", "nsys", "Status", "Duration", "Disk")


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


def cells(row: Any, size: int | None = None) -> list[str]:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((row.started_ns or row.created_ns) / 1e9))
    launcher = row.launcher + (f" ×{row.spec.get('nproc')}" if row.launcher == "torchrun" else "")
    nsys = "yes" if (row.spec.get("nsys") or {}).get("enabled") else ""
    duration = "" if row.duration_s is None else f"{row.duration_s:.1f} s"
    disk = "" if size is None else human(size)
    return [row.id, started, Path(row.script).name, launcher, row.start_method, nsys, describe_status(row), duration,
            disk]


def human(n: int) -> str:
    from gpuscope.store.retention import human as fmt

    return fmt(n)


class QtHistory(QWidget):
    """``sigOpenRun(row)`` when the user opens a run; ``sigCompare(ids)`` to compare the selected runs;
    ``sigError(text)``; ``sigLoaded(n)``."""

    sigOpenRun = Signal(object)
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
        self.open_button = QPushButton("Open run")
        self.open_button.clicked.connect(self._open_selected)
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
        self.status = QLabel()
        self.footer = QLabel()
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bar = QHBoxLayout()
        bar.addWidget(self.open_button)
        bar.addWidget(self.compare_button)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.delete_button)
        bar.addWidget(self.status, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.table)
        lay.addWidget(self.footer)

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
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.status.setText(data.note or self._done_note or (f"{len(rows)} run(s)" if rows else
                                                             "no runs yet: run a script from the Run tab"))
        self._done_note = ""
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
