"""The run's process tree, updated live: pid, role, rank, state, CPU, RSS, GPU memory."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

from gpuscope.app.live_model import LiveModel, ProcRow

COLUMNS = ("PID", "Role", "Rank", "State", "CPU %", "RSS", "GPU mem", "Name")
STATES = {"R": "running", "S": "sleeping", "D": "disk wait", "Z": "zombie", "T": "stopped", "I": "idle"}


def mib(value: int | None) -> str:
    return "—" if value is None else f"{value / (1 << 20):,.1f} MiB"


def cells(row: ProcRow, gpu: bool) -> list[str]:
    state = "ended" if not row.alive else STATES.get(row.state, row.state)
    return [str(row.pid), row.role or "", "" if row.rank is None else str(row.rank), state,
            "" if row.cpu is None else f"{row.cpu:.0f}", mib(row.rss), mib(row.gpu_mem) if gpu else "n/a",
            row.name]


class QtProcessTree(QTreeWidget):
    """Rows keyed by pid; children under their parent when the parent belongs to the run."""

    def __init__(self, model: LiveModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.live_model = model
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(list(COLUMNS))
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.items: dict[int, QTreeWidgetItem] = {}
        self._parent_of: dict[int, int | None] = {}
        self._drawn = -1
        for i, w in enumerate((120, 120, 45, 75, 55, 90, 90)):
            self.setColumnWidth(i, w)

    def reset_rows(self) -> None:
        self.clear()
        self.items.clear()
        self._parent_of.clear()
        self._drawn = -1

    def refresh(self) -> bool:
        if self.live_model.version == self._drawn:
            return False
        self._drawn = self.live_model.version
        gpu = not self.live_model.gpu_reason
        for pid in sorted(self.live_model.procs):
            row = self.live_model.procs[pid]
            item = self._item(row)
            for col, text in enumerate(cells(row, gpu)):
                if item.text(col) != text:
                    item.setText(col, text)
            if item.data(0, Qt.ItemDataRole.UserRole) != row.alive:
                item.setData(0, Qt.ItemDataRole.UserRole, row.alive)
                brush = QBrush() if row.alive else QBrush(QColor("#999999"))
                for col in range(len(COLUMNS)):
                    item.setForeground(col, brush)
        return True

    def _item(self, row: ProcRow) -> QTreeWidgetItem:
        parent_pid = row.ppid if row.ppid in self.live_model.procs and row.ppid != row.pid else None
        item = self.items.get(row.pid)
        if item is not None and self._parent_of.get(row.pid) == parent_pid:
            return item
        if item is not None:  # re-parented (its parent died, or appeared late)
            old = item.parent()
            (old.removeChild(item) if old is not None else self.takeTopLevelItem(self.indexOfTopLevelItem(item)))
        else:
            item = QTreeWidgetItem()
            for col in (0, 2, 4, 5, 6):
                item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.items[row.pid] = item
        parent = self.items.get(parent_pid) if parent_pid is not None else None
        if parent_pid is not None and parent is None:
            parent = self._item(self.live_model.procs[parent_pid])
        (parent.addChild(item) if parent is not None else self.addTopLevelItem(item))
        if parent is not None:
            parent.setExpanded(True)
        self._parent_of[row.pid] = parent_pid
        return item
