"""Past runs from the store: a table, refreshed off the GUI thread; open one to see it again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from gpuscope.app import workers

COLUMNS = ("Run", "Started", "Script", "Launcher", "Start method", "nsys", "Status", "Duration")


def query_runs(limit: int = 200) -> list[Any]:
    """The newest runs (a pool thread calls this)."""
    import sqlite3

    from gpuscope import paths
    from gpuscope.errors import UserError
    from gpuscope.store import db, runs

    try:
        conn = db.connect()
        try:
            return runs.list_runs(conn, limit=limit)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"cannot read the run store {paths.store_path()}: {exc}") from None


def describe_status(row: Any) -> str:
    if row.status in ("exited", "failed") and row.signal:
        return f"{row.status} ({row.signal})"
    if row.status in ("exited", "failed") and row.exit_code not in (None, 0):
        return f"{row.status} (exit {row.exit_code})"
    return row.status


def cells(row: Any) -> list[str]:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((row.started_ns or row.created_ns) / 1e9))
    launcher = row.launcher + (f" ×{row.spec.get('nproc')}" if row.launcher == "torchrun" else "")
    nsys = "yes" if (row.spec.get("nsys") or {}).get("enabled") else ""
    duration = "" if row.duration_s is None else f"{row.duration_s:.1f} s"
    return [row.id, started, Path(row.script).name, launcher, row.start_method, nsys, describe_status(row), duration]


class QtHistory(QWidget):
    """``sigOpenRun(row)`` when the user opens a run; ``sigError(text)``; ``sigBusy(task|None)``."""

    sigOpenRun = Signal(object)
    sigError = Signal(str)
    sigLoaded = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[Any] = []
        self.task: workers.Task | None = None
        # how to run the query: the main window passes its run_task (status bar busy bar + Cancel)
        self.runner: Any = None
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.doubleClicked.connect(self._open_selected)
        self.open_button = QPushButton("Open run")
        self.open_button.clicked.connect(self._open_selected)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.status = QLabel()
        bar = QHBoxLayout()
        bar.addWidget(self.open_button)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.status, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.table)

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

    def _fill(self, rows: list[Any]) -> None:
        self.task = None
        self.rows = rows
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, text in enumerate(cells(row)):
                item = QTableWidgetItem(text)
                if j == 0:
                    item.setData(Qt.ItemDataRole.UserRole, i)
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.status.setText(f"{len(rows)} run(s)" if rows else "no runs yet: run a script from the Run tab")
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
