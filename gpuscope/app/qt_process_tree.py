"""The run's process tree, updated live: pid, role, rank, state, CPU, RSS, GPU memory.

A process that a finding is about carries a badge (a red or yellow "!" before its pid, the
findings' titles as its tooltip); clicking the row emits ``sigFindingClicked(code, pid)``.

The user's processes form the tree, their first process at the root (under nsys it is started by
``nsys-launcher``: that parent is not shown above it). A tool's own processes (Nsight Systems:
nsys, nsys-launcher, nsys-tee, QdstrmImporter, the agent) are listed apart, greyed, under one
collapsed group row that shows their number and total CPU and RSS.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QIcon
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

from gpuscope.app.live_model import LiveModel, ProcRow
from gpuscope.app.qt_findings import badge_icon, finding_pids

COLUMNS = ("PID", "Role", "Rank", "State", "CPU %", "RSS", "GPU mem", "Name")
STATES = {"R": "running", "S": "sleeping", "D": "disk wait", "Z": "zombie", "T": "stopped", "I": "idle"}


def mib(value: int | None) -> str:
    return "—" if value is None else f"{value / (1 << 20):,.1f} MiB"


def cells(row: ProcRow, gpu: bool) -> list[str]:
    state = "ended" if not row.alive else STATES.get(row.state, row.state)
    return [str(row.pid), row.role or "", "" if row.rank is None else str(row.rank), state,
            "" if row.cpu is None else f"{row.cpu:.0f}", mib(row.rss), mib(row.gpu_mem) if gpu else "n/a",
            row.name]


TOOL_GREY = "#8a8a8a"


def group_cells(name: str, count: int, cpu: float, rss: int) -> list[str]:
    return ["", name, "", "", f"{cpu:.0f}", mib(rss), "", f"total of {count} process{'es' if count != 1 else ''}"]


class QtProcessTree(QTreeWidget):
    """Rows keyed by pid; children under their parent when the parent is one of the user's
    processes of the run; a tool's processes under its group row."""

    sigFindingClicked = Signal(str, int)     # code, pid: a badged row was clicked

    def __init__(self, model: LiveModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.badges: dict[int, list] = {}    # pid -> findings about it (gpuscope.finding.Finding)
        self.live_model = model
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(list(COLUMNS))
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.items: dict[int, QTreeWidgetItem] = {}
        self.group_items: dict[str, QTreeWidgetItem] = {}
        self._parent_of: dict[int, int | str | None] = {}
        self._drawn = -1
        for i, w in enumerate((120, 120, 45, 75, 55, 90, 90)):
            self.setColumnWidth(i, w)
        self.itemClicked.connect(self._clicked)

    def set_findings(self, findings: list) -> None:
        """Badge the rows of the processes these findings are about (worst severity first)."""
        badges: dict[int, list] = {}
        for f in sorted(findings, key=lambda f: -f.severity.rank):
            for pid in finding_pids(f):
                badges.setdefault(pid, []).append(f)
        if badges != self.badges:
            self.badges = badges
            for pid, item in self.items.items():
                self._badge(pid, item)

    def _badge(self, pid: int, item: QTreeWidgetItem) -> None:
        found = self.badges.get(pid)
        key = tuple((f.code, f.severity.value) for f in found) if found else None
        if item.data(0, Qt.ItemDataRole.UserRole + 1) == key:
            return
        item.setData(0, Qt.ItemDataRole.UserRole + 1, key)
        item.setIcon(0, badge_icon(found[0].severity.value) if found else QIcon())
        item.setToolTip(0, "\n".join(f"{f.severity.value}: {f.title}" for f in found) if found else "")

    def _clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        pid = next((p for p, it in self.items.items() if it is item), None)
        if pid is not None and self.badges.get(pid):
            self.sigFindingClicked.emit(self.badges[pid][0].code, pid)

    def reset_rows(self) -> None:
        self.clear()
        self.items.clear()
        self.badges = {}
        self.group_items.clear()
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
            if self.badges:
                self._badge(pid, item)
            for col, text in enumerate(cells(row, gpu)):
                if item.text(col) != text:
                    item.setText(col, text)
            look = (row.alive, row.user)
            if item.data(0, Qt.ItemDataRole.UserRole) != look:
                item.setData(0, Qt.ItemDataRole.UserRole, look)
                brush = QBrush() if row.alive and row.user else QBrush(QColor("#999999" if row.user else TOOL_GREY))
                for col in range(len(COLUMNS)):
                    item.setForeground(col, brush)
        self._refresh_groups()
        return True

    def _refresh_groups(self) -> None:
        """Group rows: their totals, kept below the user's processes."""
        for name, item in self.group_items.items():
            for col, text in enumerate(group_cells(name, *self.live_model.group_total(name))):
                if item.text(col) != text:
                    item.setText(col, text)
            index = self.indexOfTopLevelItem(item)
            if index != self.topLevelItemCount() - 1:
                expanded = item.isExpanded()
                self.takeTopLevelItem(index)
                self.addTopLevelItem(item)
                item.setExpanded(expanded)

    def _group_item(self, name: str) -> QTreeWidgetItem:
        item = self.group_items.get(name)
        if item is None:
            item = self.group_items[name] = QTreeWidgetItem()
            font = item.font(1)
            font.setItalic(True)
            for col in range(len(COLUMNS)):
                item.setForeground(col, QBrush(QColor(TOOL_GREY)))
                item.setFont(col, font)
            item.setToolTip(1, f"{name}'s own processes, not the program's (left out of the plots)")
            self.addTopLevelItem(item)
            item.setExpanded(False)
        return item

    def _parent_key(self, row: ProcRow) -> int | str | None:
        """The group of a tool's process; a user process's parent when that is a user process too."""
        if row.group is not None:
            return row.group
        parent = self.live_model.procs.get(row.ppid)
        return row.ppid if parent is not None and parent.user and row.ppid != row.pid else None

    def _item(self, row: ProcRow) -> QTreeWidgetItem:
        parent_pid = self._parent_key(row)
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
        if isinstance(parent_pid, str):
            self._group_item(parent_pid).addChild(item)   # stays collapsed
            self._parent_of[row.pid] = parent_pid
            return item
        parent = self.items.get(parent_pid) if parent_pid is not None else None
        if parent_pid is not None and parent is None:
            parent = self._item(self.live_model.procs[parent_pid])
        (parent.addChild(item) if parent is not None else self.addTopLevelItem(item))
        if parent is not None:
            parent.setExpanded(True)
        self._parent_of[row.pid] = parent_pid
        return item
