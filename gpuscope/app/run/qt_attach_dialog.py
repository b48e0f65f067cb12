"""File → Attach to a running job…: a picker of this user's Python process trees, refreshing while
open. The rows come from :func:`gpuscope.attach.candidates.list_trees`, read on a pool thread; the
cells from :class:`gpuscope.views.attach_picker.PickerModel`."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDialog, QDialogButtonBox, QHBoxLayout,
                               QHeaderView, QLabel, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from gpuscope.app import workers
from gpuscope.views.attach_picker import COLUMNS, NUMERIC, PickerModel

REFRESH_MS = 2000
PID_ROLE = Qt.ItemDataRole.UserRole + 1
KEY_ROLE = Qt.ItemDataRole.UserRole + 2


def list_trees(all_users: bool) -> list[Any]:
    from gpuscope.attach.candidates import list_trees as listed

    return listed(all_users=all_users)


class _Cell(QTableWidgetItem):
    """Sorts by the row's key (numbers as numbers), not by its text."""

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(KEY_ROLE), other.data(KEY_ROLE)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b
        return str(a) < str(b)


class QtAttachDialog(QDialog):
    """The picker; ``chosen_pid`` once accepted. ``lister(all_users)`` reads the rows (blocking)."""

    def __init__(self, parent: QWidget | None = None,
                 lister: Callable[[bool], list[Any]] = list_trees) -> None:
        super().__init__(parent)
        self.setWindowTitle("Attach to a running job")
        self.resize(980, 420)
        self.model = PickerModel()
        self.lister = lister
        self.chosen_pid: int | None = None
        self._task: workers.Task | None = None
        intro = QLabel("Choose a Python job started outside gpuscope. gpuscope follows its process tree, reads its "
                       "stacks on request and records what it sees; it sends the job no signal and writes "
                       "nothing into its folders.")
        intro.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(COLUMNS.index("CPU %"), Qt.SortOrder.DescendingOrder)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COLUMNS.index("Command"), QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selected)
        self.table.itemDoubleClicked.connect(lambda _item: self._attach())
        self.all_users = QCheckBox("all users' jobs")
        self.all_users.setToolTip("list other users' jobs too: their stacks need root or CAP_SYS_PTRACE")
        self.all_users.toggled.connect(lambda _on: self.refresh())
        self.status = QLabel("listing Python processes…")
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.attach_button = self.buttons.addButton("Attach", QDialogButtonBox.ButtonRole.AcceptRole)
        self.attach_button.setEnabled(False)
        self.attach_button.setDefault(True)
        self.buttons.accepted.connect(self._attach)
        self.buttons.rejected.connect(self.reject)
        bar = QHBoxLayout()
        bar.addWidget(self.status, 1)
        bar.addWidget(self.all_users)
        bar.addWidget(self.refresh_button)
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(self.table, 1)
        lay.addLayout(bar)
        lay.addWidget(self.buttons)
        self.timer = QTimer(self, interval=REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.finished.connect(lambda _r: self.timer.stop())
        self.timer.start()
        self.refresh()

    # -- rows ------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the rows again on a pool thread (one read at a time)."""
        if self._task is not None:
            return
        all_users = self.all_users.isChecked()
        self._task = workers.submit(lambda task: self.lister(all_users), on_done=self._listed,
                                    on_error=self._failed, label="listing Python jobs")

    def _listed(self, trees: list[Any]) -> None:
        self._task = None
        self.model.update(trees)
        self._fill()

    def _failed(self, text: str) -> None:
        self._task = None
        self.model.failed(text)
        self.status.setText(self.model.status_line())

    def _fill(self) -> None:
        chosen = self.model.chosen
        table = self.table
        table.setSortingEnabled(False)
        table.blockSignals(True)
        table.setRowCount(len(self.model.rows))
        for r, row in enumerate(self.model.rows):
            for c, (text, key) in enumerate(zip(row.cells, row.keys)):
                item = _Cell(text)
                item.setData(PID_ROLE, row.root_pid)
                item.setData(KEY_ROLE, key)
                item.setToolTip(row.tooltip)
                if COLUMNS[c] in NUMERIC:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                table.setItem(r, c, item)
        table.setSortingEnabled(True)
        table.clearSelection()
        if chosen is not None:
            for r in range(table.rowCount()):
                cell = table.item(r, 0)
                if cell is not None and cell.data(PID_ROLE) == chosen:
                    table.selectRow(r)
        table.blockSignals(False)
        self.attach_button.setEnabled(self.model.chosen is not None)
        self.status.setText(self.model.status_line())

    def _selected(self) -> None:
        items = self.table.selectedItems()
        self.model.choose(items[0].data(PID_ROLE) if items else None)
        self.attach_button.setEnabled(self.model.chosen is not None)

    def select_pid(self, root_pid: int) -> bool:
        """Choose a job by its root pid (tests, scripted mode); False when it is not listed."""
        self.model.choose(root_pid)
        self._fill()
        return self.model.chosen == root_pid

    def _attach(self) -> None:
        if self.model.chosen is None:
            return
        self.chosen_pid = self.model.chosen
        self.accept()

    def done(self, result: int) -> None:
        self.timer.stop()
        if self._task is not None:
            self._task.cancel()
        super().done(result)
