"""QtCleanup: the Cleanup tab — suspects with their evidence, check boxes, and safe clean-up.

Listing and acting go through :mod:`gpuscope.cleanup` (the same ``Scanner`` / ``perform`` as
``gpuscope cleanup``) on a worker thread. Nothing is changed until the user checks rows, presses
"Clean up selected…" and confirms a dialog that lists exactly what will happen. Each action
re-checks its target's identity; refusals come back as their one-line reasons.

While the tab is shown it lists again every ``auto_refresh_ms`` (a scan costs tens of ms on a
worker thread, see docs/CLEANUP.md), keeping the user's check marks and selected row; it pauses
while a listing, a clean-up or the confirmation is open. /dev/shm files younger than the
scanner's threshold are not judged yet, and the tab says so.
"""

from __future__ import annotations

import html
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QHeaderView, QLabel, QMessageBox, QPushButton,
                               QSplitter, QTableView, QTextBrowser, QVBoxLayout, QWidget)

from gpuscope.app.remote.core import core
from gpuscope.app import bridge, workers
from gpuscope.app.report.qt_summary import RAW_ROLE, RawSortProxy
from gpuscope.cleanup import model as m
from gpuscope.cleanup.evidence import human_bytes, human_s
from gpuscope.cleanup.shm import SHM_MIN_AGE_S

_ROOT = QModelIndex()     # the invisible root: a table's rows have no parent
OBSERVE_EVERY_MS = 5000   # idle-GPU-holder evidence needs observations over a window
AUTO_REFRESH_MS = 3000    # while the tab is shown: list again (a scan is cheap, off the GUI thread)
_KIND = {m.KIND_PROCESS: "process", m.KIND_ZOMBIE: "zombie", m.KIND_SHM: "shared memory",
         m.KIND_GPU_GHOST: "GPU memory"}


def _ev(s: m.Suspect) -> m.Evidence | dict[str, Any]:
    """A suspect's evidence fields (none: empty)."""
    return s.evidence if s.evidence is not None else {}


def _kind(s: m.Suspect) -> str:
    if s.kind == m.KIND_SHM and _ev(s).get("semaphore"):
        return "semaphore"
    return _KIND.get(s.kind, s.kind)


def _size(s: m.Suspect) -> int | None:
    ev = _ev(s)
    return ev.get("allocated_bytes") if s.kind == m.KIND_SHM else ev.get("rss_bytes")


def _age(s: m.Suspect) -> float | None:
    ev = _ev(s)
    return ev.get("modified_s_ago") if s.kind == m.KIND_SHM else ev.get("age_s")


# (title, raw value, display text) per column; column 0 also carries the check box.
COLUMNS: list[tuple[str, Callable[[m.Suspect], Any], Callable[[Any], str]]] = [
    ("Kind", _kind, str),
    ("Target", lambda s: s.title, str),
    ("Why", lambda s: "; ".join(r.text for r in s.reasons), str),
    ("User", lambda s: _ev(s).get("user") or _ev(s).get("owner") or "", str),
    ("Age", _age, lambda v: human_s(v) if v is not None else "-"),
    ("CPU %", lambda s: _ev(s).get("cpu_percent"), lambda v: "-" if v is None else f"{v:.0f}"),
    ("RAM", _size, human_bytes),
    ("GPU memory", lambda s: _ev(s).get("gpu_memory_bytes"), human_bytes),
    ("Activity", lambda s: _ev(s).get("last_activity") or _ev(s).get("state") or "", str),
    ("Run", lambda s: _ev(s).get("run_id") or "", str),
    ("Action", lambda s: ", ".join(s.actions) or "advice only", str),
    ("Safety", lambda s: s.blocked or ("ok" if s.actions and s.identity is not None else s.advice or ""), str),
]


def actionable(s: m.Suspect) -> bool:
    """Can the user check this row? (gpuscope may act on it)."""
    return bool(s.actions) and s.identity is not None and not s.blocked


def plan_line(s: m.Suspect, force: bool, grace_s: float) -> str:
    """What "clean up" will do to one suspect, in words (the confirmation lists these)."""
    ev = _ev(s)
    if s.kind == m.KIND_SHM and ev.get("semaphore"):
        return f"unlink the named semaphore {s.identity}"
    if s.kind == m.KIND_SHM:
        return f"unlink {s.identity} ({human_bytes(ev.get('allocated_bytes'))} in RAM)"
    if s.kind == m.KIND_ZOMBIE:
        return f"send SIGCHLD to pid {ev.get('ppid')} so it reaps zombie pid {s.pid}"
    how = "SIGKILL at once" if force else f"SIGTERM, then SIGKILL after {grace_s:g} s if still running"
    return f"terminate pid {s.pid} ({ev.get('name', '?')}) with {how}: {ev.get('cmdline', '')[:120]}"


class SuspectsModel(QAbstractTableModel):
    """Suspects of one listing, with the user's check marks (kept by key across refreshes)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.suspects: list[m.Suspect] = []
        self.checked: set[str] = set()

    def set_suspects(self, suspects: list[m.Suspect]) -> None:
        self.beginResetModel()
        self.suspects = list(suspects)
        keys = {s.key for s in suspects if actionable(s)}
        self.checked &= keys
        self.endResetModel()

    def selected(self) -> list[m.Suspect]:
        return [s for s in self.suspects if s.key in self.checked]

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.suspects)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = _ROOT) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][0]
        return None

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        f = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() == 0 and actionable(self.suspects[index.row()]):
            f |= Qt.ItemFlag.ItemIsUserCheckable
        return f

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        s = self.suspects[index.row()]
        title, raw, text = COLUMNS[index.column()]
        if role == Qt.ItemDataRole.CheckStateRole and index.column() == 0:
            if not actionable(s):
                return None
            return Qt.CheckState.Checked if s.key in self.checked else Qt.CheckState.Unchecked
        if role == RAW_ROLE:
            v = raw(s)
            return -1 if v is None else v
        if role == Qt.ItemDataRole.DisplayRole:
            return text(raw(s))
        if role == Qt.ItemDataRole.ToolTipRole:
            return "\n".join(r.text for r in s.reasons) + (f"\nBlocked: {s.blocked}" if s.blocked else "")
        if role == Qt.ItemDataRole.ForegroundRole and s.blocked:
            return QColor(120, 120, 120)
        return None

    def setData(self, index: QModelIndex | QPersistentModelIndex, value: Any,
                role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.CheckStateRole or index.column() != 0:
            return False
        s = self.suspects[index.row()]
        if not actionable(s):
            return False
        on = value in (Qt.CheckState.Checked, Qt.CheckState.Checked.value, 2, True)
        (self.checked.add if on else self.checked.discard)(s.key)
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.CheckStateRole])
        return True


def evidence_html(s: m.Suspect) -> str:
    """The details pane: reasons, every evidence field, the safety verdict and advice."""
    rows = "".join(f"<tr><td><b>{html.escape(str(k))}</b></td><td>{html.escape(str(v))}</td></tr>"
                   for k, v in _ev(s).items() if v not in (None, "", []))
    why = "".join(f"<li>{html.escape(r.text)} <i>[{html.escape(r.code)}]</i></li>" for r in s.reasons)
    out = f"<h3>{html.escape(s.title)}</h3><ul>{why}</ul><table cellspacing=3>{rows}</table>"
    if s.blocked:
        out += f"<p><b>Blocked:</b> {html.escape(s.blocked)}</p>"
    if s.advice:
        out += f"<p><b>Advice:</b> {html.escape(s.advice)}</p>"
    return out


def result_html(r: m.ActionResult) -> str:
    """One action result: its one-line message and the memory it freed."""
    color = "#1b7f2a" if r.ok else "#b00020"
    freed = ", ".join(f"{k.replace('_bytes', '').replace('_', ' ')} {human_bytes(v)}"
                      for k, v in r.freed.items() if v)
    tail = f" <i>(freed: {html.escape(freed)})</i>" if freed and r.ok else ""
    return (f"<div style='color:{color}'>[{html.escape(r.result)}] {html.escape(r.action)} "
            f"{html.escape(r.target)}: {html.escape(r.message)}{tail}</div>")


class QtCleanup(QWidget):
    """Suspects table, Refresh (and an automatic one while shown), "Clean up selected…" with a
    confirmation, results below."""

    sigRefreshed = Signal(object)     # the ScanResult shown
    sigCleaned = Signal(list)         # the ActionResults of one clean-up
    sigError = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, use_gpu: bool = True, idle_window_s: float = 300.0,
                 shm_min_age_s: float = SHM_MIN_AGE_S, grace_s: float = 3.0, connect: Callable | None = None,
                 observe_every_ms: int = OBSERVE_EVERY_MS, auto_refresh_ms: int = AUTO_REFRESH_MS) -> None:
        super().__init__(parent)
        bridge.install()
        self._scanner_args = dict(use_gpu=use_gpu, idle_window_s=idle_window_s, shm_min_age_s=shm_min_age_s)
        self.grace_s = grace_s
        self._connect = connect
        self._scanner = None
        self._core: Any = None
        self._conn = None
        self._task: workers.Task | None = None      # the user's: a listing or a clean-up
        self._observer: workers.Task | None = None  # background observation (uses the scanner)
        self._refresh_pending = False
        self.confirm_box: QMessageBox | None = None
        self.result: m.ScanResult | None = None
        self.last_results: list[m.ActionResult] = []
        self.model = SuspectsModel(self)
        self.proxy = RawSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self._build()
        self.model.dataChanged.connect(self._update_buttons)
        self.model.modelReset.connect(self._update_buttons)
        self.view.selectionModel().currentRowChanged.connect(self._show_details)
        self._observe_timer = QTimer(self)
        self._observe_timer.timeout.connect(self._observe)
        if observe_every_ms > 0:
            self._observe_timer.start(observe_every_ms)
        self.auto_refresh_ms = auto_refresh_ms
        self._auto_timer = QTimer(self)            # runs only while the tab is shown
        self._auto_timer.timeout.connect(self._auto_refresh)
        self._auto_pending = False                 # the listing running was started by the timer
        self._listed_once = False
        self.hint.setText(self._hint_text())
        self.hint.setVisible(bool(self.hint.text()))
        self._update_buttons()

    def _hint_text(self) -> str:
        age = self._scanner_args["shm_min_age_s"]
        auto = (f"Lists again every {self.auto_refresh_ms / 1000:g} s while shown. "
                if self.auto_refresh_ms > 0 else "")
        young = (f"/dev/shm segments and semaphores younger than {age:g} s are not judged yet (their creator "
                 "may be about to map them)." if age > 0 else "")
        return (auto + young).strip()

    def _build(self) -> None:
        self.refresh_button = QPushButton("Refresh", self)
        self.clean_button = QPushButton("Clean up selected…", self)
        self.force_box = QCheckBox("SIGKILL at once (no grace period)", self)
        self.refresh_button.clicked.connect(self.refresh)
        self.clean_button.clicked.connect(self.ask_clean)
        self.state = QLabel("Press Refresh to look for leftovers.", self)
        self.hint = QLabel(self)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: #505050;")
        top = QHBoxLayout()
        for w in (self.refresh_button, self.clean_button, self.force_box):
            top.addWidget(w)
        top.addWidget(self.state, 1)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)   # the core's order until the user sorts
        self.view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.view.setAlternatingRowColors(True)
        self.view.verticalHeader().setVisible(False)
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.horizontalHeader().setStretchLastSection(True)
        self.notes = QLabel(self)
        self.notes.setWordWrap(True)
        self.details = QTextBrowser(self)
        self.details.setPlaceholderText("Select a row to see its evidence.")
        self.results = QTextBrowser(self)
        self.results.setPlaceholderText("Results of clean-ups appear here.")
        below = QSplitter(Qt.Orientation.Horizontal, self)
        below.addWidget(self.details)
        below.addWidget(self.results)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.view)
        split.addWidget(below)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.hint)
        lay.addWidget(self.notes)
        lay.addWidget(split, 1)

    # ----------------------------------------------------------------- worker side

    def _ensure(self):
        """The scanner and store connection (made on first use, on a worker thread)."""
        if self._scanner is None or self._core is not core():   # connected to another host since
            self._core = core()
            self._scanner, self._conn = core().cleanup_scanner(self._connect() if self._connect else None,
                                                            **self._scanner_args)
        return self._scanner

    def _submit(self, fn, on_done, label: str) -> None:
        self._task = workers.submit(fn, on_done=on_done, on_error=self._failed, label=label)
        self._update_buttons()

    # ----------------------------------------------------------------- listing

    @property
    def busy(self) -> bool:
        """A listing or a clean-up is running (background observations do not count)."""
        return self._task is not None

    def refresh(self) -> None:
        """List suspects again (off the GUI thread); after a running observation if there is one."""
        if self._task is not None:
            return
        if self._observer is not None:     # the scanner is not thread-safe: list right after it
            self._refresh_pending = True
            return
        if not self._auto_pending:
            self.state.setText("Looking for leftovers…")
        self._submit(lambda task: self._ensure().scan(), self._listed, "cleanup scan")

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.auto_refresh_ms > 0:
            self._auto_timer.start(self.auto_refresh_ms)

    def hideEvent(self, event) -> None:
        self._auto_timer.stop()
        super().hideEvent(event)

    def _auto_refresh(self) -> None:
        """The timer's listing: quiet (no "Looking…" flicker), never over a dialog or a clean-up."""
        if self.busy or self._observer is not None or self.confirm_box is not None or not self.isVisible():
            return
        self._auto_pending = True
        self.refresh()

    def _observe(self) -> None:
        if self._task is not None or self._observer is not None or self._scanner is None \
                or not self.isVisible() or self._auto_timer.isActive():   # (the listing observes too)
            return
        self._observer = workers.submit(lambda task: (self._scanner.observe(), None)[1],
                                        on_done=self._observed, on_error=self._observed,
                                        label="cleanup observe")

    def _observed(self, _: Any) -> None:
        """An observation ended (a failed one only costs that sample's evidence)."""
        self._observer = None
        if self._refresh_pending:
            self._refresh_pending = False
            self.refresh()

    def _listed(self, result: m.ScanResult) -> None:
        self._task = None
        self._auto_pending = False
        self.result = result
        current = self._current_key()
        self.model.set_suspects(result.suspects)
        if not self._reselect(current):
            self.details.clear()
        if not self._listed_once:          # later listings keep the widths the user chose
            self._listed_once = True
            self.view.resizeColumnsToContents()
            for col in (1, 2):
                self.view.setColumnWidth(col, min(self.view.columnWidth(col), 360))
        n_act = sum(1 for s in result.suspects if actionable(s))
        self.state.setText(f"{len(result.suspects)} suspect(s), {n_act} that gpuscope can clean up."
                           if result.suspects else "No leftovers found.")
        self.notes.setText("\n".join(f"Note: {n}" for n in result.notes))
        lay = self.layout()
        if lay is not None:
            lay.activate()
        self._update_buttons()
        self.sigRefreshed.emit(result)

    def _current_key(self) -> str | None:
        index = self.view.selectionModel().currentIndex()
        if not index.isValid():
            return None
        row = self.proxy.mapToSource(index).row()
        return self.model.suspects[row].key if 0 <= row < len(self.model.suspects) else None

    def _reselect(self, key: str | None) -> bool:
        """Select the row of ``key`` again after a listing (and show its fresh evidence)."""
        for row, s in enumerate(self.model.suspects):
            if s.key == key:
                index = self.proxy.mapFromSource(self.model.index(row, 0))
                self.view.selectionModel().setCurrentIndex(
                    index, self.view.selectionModel().SelectionFlag.ClearAndSelect
                    | self.view.selectionModel().SelectionFlag.Rows)
                self.details.setHtml(evidence_html(s))
                return True
        return False

    def _failed(self, text: str) -> None:
        self._task = None
        self._auto_pending = False
        self.state.setText(text)
        self._update_buttons()
        self.sigError.emit(text)

    def _update_buttons(self, *args: Any) -> None:
        self.refresh_button.setEnabled(not self.busy)
        self.clean_button.setEnabled(not self.busy and bool(self.model.checked))

    def _show_details(self, current: QModelIndex, previous: QModelIndex) -> None:
        if current.isValid():
            s = self.model.suspects[self.proxy.mapToSource(current).row()]
            self.details.setHtml(evidence_html(s))

    # ----------------------------------------------------------------- checking and cleaning

    def set_checked(self, key: str, on: bool = True) -> bool:
        """Check a row by suspect key (``pid:123``, ``shm:name``); False if it cannot be checked."""
        for row, s in enumerate(self.model.suspects):
            if s.key == key:
                state = Qt.CheckState.Checked if on else Qt.CheckState.Unchecked
                return self.model.setData(self.model.index(row, 0), state, Qt.ItemDataRole.CheckStateRole)
        return False

    def plan(self) -> list[str]:
        return [plan_line(s, self.force_box.isChecked(), self.grace_s) for s in self.model.selected()]

    def ask_clean(self) -> None:
        """Show the confirmation listing exactly the actions; act only on "Clean up"."""
        lines = self.plan()
        if not lines or self.busy:
            return
        box = QMessageBox(QMessageBox.Icon.Warning, "Clean up",
                          f"gpuscope will do {len(lines)} action(s):", QMessageBox.StandardButton.NoButton, self)
        box.setInformativeText("<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"
                               "Each target is re-checked (pid and start time, or file identity) "
                               "right before it is touched.")
        box.addButton("Clean up", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.finished.connect(lambda _: self._confirmed(box))
        self.confirm_box = box
        box.open()

    def _confirmed(self, box: QMessageBox) -> None:
        self.confirm_box = None
        clicked = box.clickedButton()
        if clicked is None or box.buttonRole(clicked) != QMessageBox.ButtonRole.AcceptRole:
            self.state.setText("Clean-up cancelled: nothing was changed.")
            return
        self.clean_selected()

    def clean_selected(self) -> None:
        """Act on the checked suspects now (the dialog calls this after confirmation)."""
        targets = self.model.selected()
        if not targets or self.busy:
            return
        force, grace_s = self.force_box.isChecked(), self.grace_s

        def work(task: workers.Task) -> list[m.ActionResult]:
            self._ensure()
            return core().cleanup_apply(targets, force, grace_s, self._conn)

        self.state.setText(f"Cleaning up {len(targets)} target(s)…")
        self._submit(work, self._cleaned, "cleanup")

    def _cleaned(self, results: list[m.ActionResult]) -> None:
        self._task = None
        self.last_results = results
        self.model.checked.clear()
        self.results.setHtml("".join(result_html(r) for r in results))
        ok = sum(1 for r in results if r.ok)
        self.state.setText(f"{ok} of {len(results)} action(s) done.")
        self.sigCleaned.emit(results)
        self.refresh()

    def closeEvent(self, event) -> None:
        self._observe_timer.stop()
        self._auto_timer.stop()
        super().closeEvent(event)
