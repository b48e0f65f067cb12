"""The run's processes as a table like htop's tree view: pid, name, state, CPU, RSS, GPU memory, and
after the run each process's exit, CPU time, peak RSS and lifetime as ``gpuscope run`` prints them.

- **Tree, sorted**: children stay under their parent; a click on a column header sorts the
  processes of each level by that column (htop's sorted tree view), numbers as numbers. "Tree
  view" off (context menu, F5) lists every process flat, sorted as a whole. Tree lines (├─ └─)
  show who started whom.
- **Names**: a process is named by :func:`gpuscope.trace.process_row.display_name` (its role:
  ``torchrun agent``, ``pool worker``, ``rank 1``), the name every view uses; the OS name (which a
  program may change: torchrun's agent renames itself ``pt_elastic``) is a column of its own.
- **Ended**: a process the sampler no longer sees is greyed, its state ``ended``, with its exit
  status once known (its exit record, or what its multiprocessing parent reaped: ``SIGKILL``).
  After the run the figures are the run's :class:`~gpuscope.trace.process_row.ProcessRow`
  records, formatted as the CLI table formats them (``~`` marks a sampled figure).
- **Actions** (right click, or keys): Stop (SIGTERM, SIGKILL after the grace period; Delete),
  Kill (SIGKILL; Shift+Delete) through :func:`gpuscope.cleanup.actions.act`: the Cleanup tab's
  safety rules (same user, the identity the table saw re-checked through a pidfd, never
  gpuscope or its ancestors) after a confirmation; Copy pid (Ctrl+C); Show stacks
  (``sigShowStacks(pid)``: the Stacks tab with that process's stacks selected).

A process that a finding is about carries a badge (a red or yellow "!" before its pid, the
findings' titles as its tooltip); clicking the row emits ``sigFindingClicked(code, pid)``.

The user's processes form the tree, their first process at the root (under nsys it is started by
``nsys-launcher``: that parent is not shown above it). A tool's own processes (Nsight Systems:
nsys, nsys-launcher, nsys-tee, QdstrmImporter, the agent) are listed apart, greyed, under one
collapsed group row, always last, that shows their number and total CPU and RSS.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPoint, QRect, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QIcon, QKeySequence, QPainter, QPen
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QMenu, QMessageBox, QTreeWidget, QTreeWidgetItem,
                               QWidget)

from gpuscope.app.remote.core import core
from gpuscope.app import workers
from gpuscope.views.live_model import LiveModel, ProcRow
from gpuscope.app.widgets.qt_findings import badge_icon, finding_pids
from gpuscope.runs.table import _cpu, _exit, _rss   # the CLI table's cells: the same text, one home
from gpuscope.status import signal_name

COLUMNS = ("PID", "Process", "Rank", "State", "CPU %", "RSS", "GPU mem", "Exit", "CPU time", "Peak RSS", "Lifetime",
           "OS name")
COL = {name: i for i, name in enumerate(COLUMNS)}
NUMERIC = ("PID", "Rank", "CPU %", "RSS", "GPU mem", "Exit", "CPU time", "Peak RSS", "Lifetime")
WIDTHS = (72, 170, 40, 62, 48, 72, 70, 58, 62, 68, 62)
STATES = {"R": "running", "S": "sleeping", "D": "disk wait", "Z": "zombie", "T": "stopped", "I": "idle"}
TOOL_GREY = "#8a8a8a"
ENDED_GREY = "#999999"
LINE_GREY = "#9a9a9a"
PID_ROLE = Qt.ItemDataRole.UserRole + 4
MISSING = (1, 0.0)                            # an unknown value sorts after every known one


def mib(value: int | None) -> str:
    return "—" if value is None else f"{value / (1 << 20):,.1f} MiB"


def exit_text(code: int | None) -> str:
    """A live exit status: the code, or the signal's name for a negative one (as multiprocessing)."""
    if code is None:
        return ""
    return str(code) if code >= 0 else signal_name(-code)


def table_name(row: ProcRow) -> str:
    """The Process column: the display name as the CLI table's ROLE column shows it (the rank has
    its own column here, as there)."""
    return row.display_as(with_rank=False)


def state_text(row: ProcRow) -> str:
    return "ended" if not row.alive else STATES.get(row.state, row.state)


def cells(row: ProcRow, gpu: bool) -> list[str]:
    """The row's texts, column by column. After the run Exit, CPU time, Peak RSS and Lifetime come
    from its ProcessRow, as ``gpuscope run``'s table prints them."""
    rec = row.record
    if rec is not None:
        after = [_exit(rec), _cpu(rec), _rss(rec), "-" if rec.lifetime_s is None else f"{rec.lifetime_s:.2f} s"]
    else:
        after = [exit_text(row.exit_code) if not row.alive else "", "",
                 "" if row.peak_rss is None else f"~{row.peak_rss / 2**20:.0f} MiB", ""]
    return [str(row.pid), table_name(row), "" if row.rank is None else str(row.rank), state_text(row),
            "" if row.cpu is None else f"{row.cpu:.0f}", mib(row.rss) if row.alive else "",
            mib(row.gpu_mem) if gpu else "n/a", *after, row.name]


def sort_keys(row: ProcRow) -> list[Any]:
    """What each column sorts by: numbers as numbers; unknown values after known ones."""
    rec = row.record

    def num(value: float | None) -> tuple[int, float]:
        return MISSING if value is None else (0, float(value))

    if rec is not None:
        code = rec.exit_code if rec.exit_code is not None else (-1 if rec.exit_signal else None)
        after = [num(code), num(rec.cpu_seconds), num(rec.peak_rss_bytes), num(rec.lifetime_s)]
    else:
        after = [num(row.exit_code), MISSING, num(row.peak_rss), MISSING]
    return [num(row.pid), (0, table_name(row).lower()), num(row.rank), (0, state_text(row)), num(row.cpu),
            num(row.rss if row.alive else None), num(row.gpu_mem), *after, (0, row.name.lower())]


def group_cells(name: str, count: int, cpu: float, rss: int, listed: int | None = None) -> list[str]:
    """A tool group's row: the total of its live processes; once all ended (``listed``: how many
    it had), "ended" and their number."""
    out = [""] * len(COLUMNS)
    out[COL["Process"]] = name
    if count == 0 and listed:
        out[COL["State"]] = "ended"
        out[COL["OS name"]] = f"{listed} process{'es' if listed != 1 else ''}"
        return out
    out[COL["CPU %"]], out[COL["RSS"]] = f"{cpu:.0f}", mib(rss)
    out[COL["OS name"]] = f"total of {count} process{'es' if count != 1 else ''}"
    return out


class _Item(QTreeWidgetItem):
    """A row that sorts by its column's sort value (``keys``, kept in Python: no conversion per
    comparison); a tool's group row (``pinned``) stays last in either order."""

    keys: list[Any] | None = None
    pinned = False
    pid = 0

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        tree = self.treeWidget()
        header = tree.header() if tree is not None else None
        pa, pb = self.pinned, getattr(other, "pinned", False)
        if pa != pb:
            ascending = header is None or header.sortIndicatorOrder() == Qt.SortOrder.AscendingOrder
            return pb if ascending else pa
        col = header.sortIndicatorSection() if header is not None else 0
        theirs = getattr(other, "keys", None)
        a = self.keys[col] if self.keys else None
        b = theirs[col] if theirs else None
        if a is None or b is None or a == b:
            return self.pid < getattr(other, "pid", 0)
        try:
            return a < b
        except TypeError:
            return str(a) < str(b)


class QtProcessTree(QTreeWidget):
    """Rows keyed by pid; children under their parent when the parent is one of the user's
    processes of the run (or all at the top: ``set_tree(False)``); a tool's processes under its group row.

    Signals: ``sigFindingClicked(code, pid)``, ``sigShowStacks(pid)``, ``sigMessage(text, error)``
    (what a stop or kill did, or why it was refused), ``sigActionDone(result)`` (its
    :class:`~gpuscope.cleanup.model.ActionResult`)."""

    KEY_HELP_AREA = "Processes table"
    KEY_HELP = (("Del", "stop the selected process (SIGTERM, asks first)"),
                ("Shift+Del", "kill the selected process (SIGKILL, asks first)"),
                ("Ctrl+C", "copy the selected pid"), ("F5", "tree view / flat list"))

    sigFindingClicked = Signal(str, int)     # code, pid: a badged row was clicked
    sigShowStacks = Signal(int)
    sigMessage = Signal(str, bool)
    sigActionDone = Signal(object)

    def __init__(self, model: LiveModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.badges: dict[int, list] = {}    # pid -> findings about it (gpuscope.finding.Finding)
        self.live_model = model
        self.tree_view = True
        self.run_id: str | None = None       # the run the rows belong to (logged with a stop/kill)
        self.grace_s = 3.0
        self.last_message = ""
        self.pending: list[workers.Task] = []
        # asks before a stop or kill; tests and scripted mode replace it
        self.confirm: Callable[[str, str], bool] = self._ask
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(list(COLUMNS))
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.setIndentation(16)
        self.setTreePosition(COL["Process"])     # the tree lines before the name, as in htop
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        head = self.headerItem()
        for name in NUMERIC:
            head.setTextAlignment(COL[name], Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        head.setToolTip(COL["Process"], "the process's role (main, pool worker, torchrun agent, rank N): "
                                        "its name in every view")
        head.setToolTip(COL["OS name"], "the name the OS shows (ps, top): gpuscope names Python processes "
                                        "gs:…; a program may rename itself (torchrun's agent: pt_elastic)")
        for name in ("Exit", "CPU time", "Peak RSS", "Lifetime"):
            head.setToolTip(COL[name], "as `gpuscope run` prints it; ~ marks a figure sampled at 10 Hz")
        self.items: dict[int, _Item] = {}
        self.group_items: dict[str, _Item] = {}
        self._parent_of: dict[int, int | str | None] = {}
        self._drawn = -1
        for i, w in enumerate(WIDTHS):
            self.setColumnWidth(i, w)
        # sorted by hand (QTreeWidget's own sorting re-sorts on every cell change): a header click
        # sorts at once; a refresh re-sorts only when a value of the sorted column moved
        header = self.header()
        header.setSectionsClickable(True)
        header.setSortIndicatorShown(True)
        header.setSortIndicator(COL["PID"], Qt.SortOrder.AscendingOrder)
        header.sortIndicatorChanged.connect(lambda _c, _o: self._sort())
        self.itemClicked.connect(self._clicked)

    # -- findings badges ------------------------------------------------------------------------
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
        pid = item.data(0, PID_ROLE)
        if pid is not None and self.badges.get(pid):
            self.sigFindingClicked.emit(self.badges[pid][0].code, pid)

    # -- rows -----------------------------------------------------------------------------------
    def reset_rows(self) -> None:
        self.clear()
        self.items.clear()
        self.badges = {}
        self.group_items.clear()
        self._parent_of.clear()
        self._drawn = -1

    def set_tree(self, on: bool) -> None:
        """Tree view (children under their parent) or a flat list, both sorted by the chosen column."""
        if on == self.tree_view:
            return
        self.tree_view = on
        badges = self.badges
        self.reset_rows()
        self.badges = badges          # the findings' badges go on the new rows
        self.refresh()

    def pid_order(self) -> list[int]:
        """The pids in the order the table shows them (depth first), for tests and copy."""
        out: list[int] = []

        def walk(item: QTreeWidgetItem) -> None:
            pid = item.data(0, PID_ROLE)
            if pid is not None:
                out.append(pid)
            for i in range(item.childCount()):
                child = item.child(i)
                if child is not None:
                    walk(child)

        for i in range(self.topLevelItemCount()):
            top = self.topLevelItem(i)
            if top is not None:
                walk(top)
        return out

    def refresh(self) -> bool:
        if self.live_model.version == self._drawn:
            return False
        self._drawn = self.live_model.version
        gpu = not self.live_model.gpu_reason
        column = self.sortColumn()
        resort = False
        for pid in sorted(self.live_model.procs):
            row = self.live_model.procs[pid]
            known = pid in self.items and self._parent_of.get(pid) == self._parent_key(row)
            item = self._item(row)
            resort = resort or not known
            if self.badges:
                self._badge(pid, item)
            for col, text in enumerate(cells(row, gpu)):
                if item.text(col) != text:
                    item.setText(col, text)
            keys = sort_keys(row)
            if item.keys != keys:
                resort = resort or item.keys is None or item.keys[column] != keys[column]
                item.keys = keys
            look = (row.alive, row.user)
            if item.data(0, Qt.ItemDataRole.UserRole) != look:
                item.setData(0, Qt.ItemDataRole.UserRole, look)
                brush = QBrush() if row.alive and row.user else QBrush(QColor(ENDED_GREY if row.user else TOOL_GREY))
                for col in range(len(COLUMNS)):
                    item.setForeground(col, brush)
                item.setToolTip(COL["State"], "" if row.alive else
                                "the sampler no longer sees it: it ended (its exit status once known)")
        self._refresh_groups()
        if resort:
            self._sort()
        return True

    def sortColumn(self) -> int:
        return self.header().sortIndicatorSection()

    def sortByColumn(self, column: int, order: Qt.SortOrder) -> None:
        """Sort by ``column`` (the header's indicator follows): every level, children under parents."""
        header = self.header()
        if (header.sortIndicatorSection(), header.sortIndicatorOrder()) == (column, order):
            self._sort()
        else:
            header.setSortIndicator(column, order)     # sortIndicatorChanged sorts

    def _sort(self) -> None:
        header = self.header()
        self.sortItems(header.sortIndicatorSection(), header.sortIndicatorOrder())

    def _refresh_groups(self) -> None:
        for name, item in self.group_items.items():
            for col, text in enumerate(group_cells(name, *self.live_model.group_total(name), item.childCount())):
                if item.text(col) != text:
                    item.setText(col, text)

    def _group_item(self, name: str) -> _Item:
        item = self.group_items.get(name)
        if item is None:
            item = self.group_items[name] = _Item()
            item.pinned = True
            font = item.font(1)
            font.setItalic(True)
            for col in range(len(COLUMNS)):
                item.setForeground(col, QBrush(QColor(TOOL_GREY)))
                item.setFont(col, font)
            for numeric in NUMERIC:
                item.setTextAlignment(COL[numeric], Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            item.setToolTip(1, f"{name}'s own processes, not the program's (left out of the plots)")
            self.addTopLevelItem(item)
            item.setExpanded(False)
        return item

    def _parent_key(self, row: ProcRow) -> int | str | None:
        """The group of a tool's process; a user process's parent when that is a user process too
        (and the table is a tree)."""
        if row.group is not None:
            return row.group
        if not self.tree_view:
            return None
        parent = self.live_model.procs.get(row.ppid)
        return row.ppid if parent is not None and parent.user and row.ppid != row.pid else None

    def _item(self, row: ProcRow) -> _Item:
        parent_pid = self._parent_key(row)
        item = self.items.get(row.pid)
        if item is not None and self._parent_of.get(row.pid) == parent_pid:
            return item
        if item is not None:  # re-parented (its parent died, or appeared late)
            old = item.parent()
            (old.removeChild(item) if old is not None else self.takeTopLevelItem(self.indexOfTopLevelItem(item)))
        else:
            item = _Item()
            item.pid = row.pid
            item.setData(0, PID_ROLE, row.pid)
            for name in NUMERIC:
                item.setTextAlignment(COL[name], Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
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

    # -- tree lines -----------------------------------------------------------------------------
    def drawBranches(self, painter: QPainter, rect: QRect, index: QModelIndex | QPersistentModelIndex) -> None:
        """Tree lines: a row's children hang from a line under its [+]/[−] box (├─ to each, └─ to
        the last); │ where an ancestor's later siblings continue below this row."""
        chain = []
        i = self.model().index(index.row(), 0, index.parent())
        while i.isValid():
            chain.append(i)
            i = i.parent()
        chain.reverse()                      # chain[0]: top level ... chain[-1]: this row
        depth = len(chain) - 1
        step = self.indentation()
        left = rect.right() + 1 - (depth + 1) * step

        def cx(column: int) -> int:
            return left + column * step + step // 2

        top, bottom, mid_y = rect.top(), rect.bottom(), rect.center().y()
        has_kids = self.model().hasChildren(chain[-1])
        painter.save()
        painter.setPen(QPen(QColor(LINE_GREY), 1))
        for level in range(1, depth):        # ancestors whose later siblings continue below this row
            anc = chain[level]
            if anc.sibling(anc.row() + 1, 0).isValid():
                painter.drawLine(cx(level - 1), top, cx(level - 1), bottom)
        if depth >= 1:                       # this row's branch, from its parent's line
            last = not index.sibling(index.row() + 1, 0).isValid()
            painter.drawLine(cx(depth - 1), top, cx(depth - 1), mid_y if last else bottom)
            painter.drawLine(cx(depth - 1), mid_y, cx(depth) - (5 if has_kids else -step // 2), mid_y)
        if has_kids:
            x = cx(depth)
            box = QRect(x - 4, mid_y - 4, 8, 8)
            expanded = self.isExpanded(chain[-1])
            if expanded:                     # the line its children hang from
                painter.drawLine(x, mid_y + 4, x, bottom)
            painter.fillRect(box, QColor("white"))
            painter.drawRect(box)
            painter.drawLine(x - 2, mid_y, x + 2, mid_y)
            if not expanded:
                painter.drawLine(x, mid_y - 2, x, mid_y + 2)
        painter.restore()

    # -- actions --------------------------------------------------------------------------------
    def selected_pid(self) -> int | None:
        item = self.currentItem()
        return None if item is None else item.data(0, PID_ROLE)

    def contextMenuEvent(self, event) -> None:
        item = self.itemAt(event.pos()) if event.reason() != event.Reason.Keyboard else self.currentItem()
        if item is not None:
            self.setCurrentItem(item)
        menu = self.build_menu(None if item is None else item.data(0, PID_ROLE))
        pos = event.globalPos() if event.reason() != event.Reason.Keyboard else \
            self.viewport().mapToGlobal(self.visualItemRect(item).bottomLeft() if item else QPoint(0, 0))
        menu.exec(pos)

    def build_menu(self, pid: int | None) -> QMenu:
        """The context menu of a row (``pid`` None: the table itself)."""
        menu = QMenu(self)
        row = self.live_model.procs.get(pid) if pid is not None else None
        live = row is not None and row.alive and not self.live_model.finished
        who = f"pid {pid}" if row is None else f"pid {pid} ({row.display})"
        stop = menu.addAction(f"Stop {who} (SIGTERM)…", lambda: self.stop(pid, kill=False))
        stop.setShortcut(QKeySequence(Qt.Key.Key_Delete))
        kill = menu.addAction(f"Kill {who} (SIGKILL)…", lambda: self.stop(pid, kill=True))
        kill.setShortcut(QKeySequence("Shift+Delete"))
        for action in (stop, kill):
            action.setEnabled(live)
            if row is not None and not live:
                action.setToolTip("it has ended")
        menu.addSeparator()
        copy = menu.addAction("Copy pid", lambda: self.copy_pid(pid))
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setEnabled(pid is not None)
        stacks = menu.addAction("Show stacks", lambda: self.sigShowStacks.emit(pid))
        stacks.setEnabled(pid is not None and row is not None and row.user)
        menu.addSeparator()
        tree = menu.addAction("Tree view", lambda: self.set_tree(not self.tree_view))
        tree.setCheckable(True)
        tree.setChecked(self.tree_view)
        tree.setShortcut(QKeySequence(Qt.Key.Key_F5))
        menu.addAction("Expand all", self.expandAll)
        return menu

    def keyPressEvent(self, event) -> None:
        pid = self.selected_pid()
        if event.key() == Qt.Key.Key_Delete and pid is not None:
            self.stop(pid, kill=bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier))
        elif event.matches(QKeySequence.StandardKey.Copy) and pid is not None:
            self.copy_pid(pid)
        elif event.key() == Qt.Key.Key_F5:
            self.set_tree(not self.tree_view)
        else:
            super().keyPressEvent(event)

    def copy_pid(self, pid: int | None) -> None:
        if pid is not None:
            QApplication.clipboard().setText(str(pid))
            self._say(f"copied pid {pid}", False)

    def _say(self, text: str, error: bool) -> None:
        self.last_message = text
        self.sigMessage.emit(text, error)

    def confirm_box(self, title: str, text: str) -> QMessageBox:
        """The confirmation: the question, then what will happen (wrapped), Cancel by default."""
        question, _, details = text.partition("\n\n")
        box = QMessageBox(QMessageBox.Icon.Question, title, question,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
        box.setInformativeText(details)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        return box

    def _ask(self, title: str, text: str) -> bool:
        return self.confirm_box(title, text).exec() == QMessageBox.StandardButton.Yes

    def stop(self, pid: int | None, kill: bool = False) -> workers.Task | None:
        """Stop (SIGTERM, then SIGKILL after the grace period) or kill one process of the run, after
        a confirmation, through the Cleanup tab's rules (:func:`gpuscope.cleanup.actions.act`: the
        identity the sampler saw is re-checked through a pidfd; gpuscope itself, its ancestors,
        PID 1 and other users' processes are refused). The result comes as ``sigMessage``."""
        row = self.live_model.procs.get(pid) if pid is not None else None
        if row is None:
            return None
        if not row.alive or self.live_model.finished:
            self._say(f"pid {pid} ({row.display}) has ended: nothing to stop", True)
            return None
        verb = "Kill" if kill else "Stop"
        how = ("SIGKILL now" if kill else f"SIGTERM, then SIGKILL if it still runs after {self.grace_s:g} s")
        children = sum(1 for r in self.live_model.procs.values() if r.ppid == row.pid and r.alive)
        text = (f"{verb} pid {pid} ({row.display}, {row.name})?\n\n{how}. Its parent may start a replacement "
                "(a pool does) or fail. "
                + (f"Its {children} child process(es) are not signalled. " if children else "")
                + "The same safety rules as the Cleanup tab apply.")
        if not self.confirm(f"{verb} a process", text):
            return None
        run_id, grace_s, start = self.run_id, self.grace_s, row.create_time
        target = row.pid

        def work(task: workers.Task) -> Any:
            return core().stop_process(target, start, kill, grace_s, run_id)

        def done(res: Any) -> None:
            if res is None:
                self._say(f"pid {pid} ({row.display}) has ended: nothing to stop", True)
                return
            self._say(res.message if res.result != "gone" else f"pid {pid} had already ended", not res.ok)
            self.sigActionDone.emit(res)

        def failed(text: str) -> None:
            self._say(text, True)

        self._say(f"{'killing' if kill else 'stopping'} pid {pid}…", False)
        task = workers.submit(work, on_done=done, on_error=failed, label=f"{verb.lower()} pid {pid}")
        self.pending = [t for t in self.pending if not t.finished.is_set()] + [task]
        return task
