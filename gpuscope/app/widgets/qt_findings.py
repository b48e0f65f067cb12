"""Findings in the app: one list widget for every place that shows them, and the strip above the
live plots.

:class:`FindingsList` takes a ``list[gpuscope.finding.Finding]`` and shows one row per finding
(severity, title); the selected finding's evidence and fix are shown beside it, with a button for
its structured action: **Apply to next run** (a fix :func:`gpuscope.findings.fixes.launch_changes`
knows), **Stop the run** (``StopRun``, while the run is live), **Clean up…** (``CleanupPids`` /
``CleanupShm``), and **Show stacks** for ``no-progress``. The widget only emits signals; the
window decides what they do. The live strip, the report view's nsys diagnostics and the compare
view use this same widget, so findings read alike everywhere.

:class:`FindingsStrip` frames a :class:`FindingsList` above the live plots: hidden while there is
no finding, red for an error, yellow for a warning (the colours of the ``--annotate`` strip).
"""

from __future__ import annotations

import functools
import html
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QIcon, QPainter, QPixmap, QTextOption
from PySide6.QtWidgets import (QApplication, QFrame, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QPushButton, QTextBrowser, QToolButton, QVBoxLayout, QWidget)

from gpuscope.app.widgets.qt_notes_banner import INFO, WARN
from gpuscope.finding import Finding
from gpuscope.fix import CleanupPids, CleanupShm, StopRun
from gpuscope.findings.fixes import describe, launch_changes

ERROR = "#fde8ea", "#d9a0a8"          # background, border
SEVERITY_COLOR = {"error": "#c62828", "warning": "#b7791f", "info": "#2f6fb0"}
SEVERITY_MARK = {"error": "✖", "warning": "⚠", "info": "ℹ"}
STACKS_CODE = "no-progress"
EXCERPT_LINES = 14
STRIP_HEIGHT = 180       # px of the list and details above the live plots (the details scroll)


@functools.lru_cache(maxsize=16)
def badge_icon(severity: str, size: int = 12) -> QIcon:
    """A filled circle in the severity's colour with a white "!" (the process rows' badge); one per
    severity, drawn once."""
    pix = QPixmap(size, size)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setBrush(QBrush(QColor(SEVERITY_COLOR.get(str(severity), "#777777"))))
    p.setPen(Qt.PenStyle.NoPen)
    p.drawEllipse(0, 0, size - 1, size - 1)
    p.setPen(QColor("white"))
    font = p.font()
    font.setBold(True)
    font.setPixelSize(size - 3)
    p.setFont(font)
    p.drawText(pix.rect(), Qt.AlignmentFlag.AlignCenter, "!")
    p.end()
    return QIcon(pix)


def finding_pids(f: Finding) -> tuple[int, ...]:
    """The processes a finding is about (its own pids, else the evidence's: ``no-progress`` names
    every process that sat idle)."""
    return f.pids or f.evidence.pids


def counts_line(findings: list[Finding]) -> str:
    """``1 error, 2 warnings`` (errors first)."""
    parts = []
    for sev in ("error", "warning", "info"):
        n = sum(1 for f in findings if f.severity == sev)
        if n:
            parts.append(f"{n} {sev}{'s' if n > 1 else ''}")
    return ", ".join(parts) or "no findings"


def seen_text(f: Finding, started_ns: int | None = None) -> str:
    """When it was first seen: seconds into the run when the start is known, the clock time otherwise."""
    if f.first_seen_ns is None:
        return "found after the run"
    if started_ns:
        return f"seen {max(0.0, (f.first_seen_ns - started_ns) / 1e9):.1f} s into the run"
    return "seen at " + time.strftime("%H:%M:%S", time.localtime(f.first_seen_ns / 1e9))


def detail_html(f: Finding, started_ns: int | None = None) -> str:
    """A finding's evidence and fix as HTML (the same parts as ``gpuscope findings`` prints)."""
    color = SEVERITY_COLOR.get(f.severity.value, "#333")
    out = [f"<p style='margin:0'><b style='color:{color}'>{html.escape(f.severity.value)}</b> "
           f"<code>[{html.escape(f.code)}]</code> <b>{html.escape(f.title)}</b></p>"]
    if f.fix:                                 # what to do first: the pane is small above the plots
        action = describe(f.action)
        out.append(f"<p style='margin:4px 0 0 0'><i>Fix:</i> {html.escape(f.fix)}"
                   + (f" <b>[{html.escape(action)}]</b>" if action else "") + "</p>")
    facts = [f"{html.escape(k)} <b>{v:g}</b>" for k, v in f.evidence.numbers]
    pids = finding_pids(f)
    if pids:
        facts.append("pid " + ", ".join(str(p) for p in pids[:12]) + (" …" if len(pids) > 12 else ""))
    facts.append(html.escape(seen_text(f, started_ns)) + ("" if f.source == "run" else f" ({html.escape(f.source)})"))
    out.append(f"<p style='margin:4px 0 0 0'><i>Evidence:</i> {' · '.join(facts)}</p>")
    if f.evidence.excerpts:
        lines = list(f.evidence.excerpts[:EXCERPT_LINES])
        more = len(f.evidence.excerpts) - len(lines)
        if more > 0:
            lines.append(f"… {more} more line(s)")
        out.append("<p style='margin:2px 0 0 0; white-space:pre-wrap; font-family:monospace; background:#f6f6f6'>"
                   + html.escape("\n".join(lines)) + "</p>")          # wrapped: no sideways scrolling
    return "".join(out)


class FindingsList(QWidget):
    """Findings (``set_findings(list[Finding])``): a row each; the selected one's evidence, fix and
    action buttons beside the list. Signals carry the structured :class:`~gpuscope.fix.Fix`."""

    sigApplyFix = Signal(object)      # a Fix with launch-panel changes: "Apply to next run"
    sigStop = Signal()                # StopRun
    sigCleanup = Signal(object)       # CleanupPids / CleanupShm
    sigStacks = Signal()              # no-progress: "Show stacks"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.findings: list[Finding] = []
        self.started_ns: int | None = None
        self.live = False                 # a live run: "Stop the run" is offered
        self.list = QListWidget(self)
        self.list.setAlternatingRowColors(False)
        self.list.setWordWrap(False)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.detail = QTextBrowser(self)
        self.detail.setOpenLinks(False)
        self.detail.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)   # long paths
        self.detail.setPlaceholderText("Select a finding for its evidence and fix.")
        self.apply_button = QPushButton("Apply to next run", self)
        self.stop_button = QPushButton("Stop the run", self)
        self.cleanup_button = QPushButton("Clean up…", self)
        self.stacks_button = QPushButton("Show stacks", self)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setToolTip("copy the finding, its evidence and fix as text")
        self.apply_button.clicked.connect(lambda: self._emit(self.sigApplyFix))
        self.stop_button.clicked.connect(self.sigStop.emit)
        self.cleanup_button.clicked.connect(lambda: self._emit(self.sigCleanup))
        self.stacks_button.clicked.connect(self.sigStacks.emit)
        self.copy_button.clicked.connect(self._copy)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        for b in (self.apply_button, self.stop_button, self.cleanup_button, self.stacks_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.copy_button)
        right = QVBoxLayout()
        right.setContentsMargins(0, 0, 0, 0)
        right.setSpacing(2)
        right.addWidget(self.detail, 1)
        right.addLayout(buttons)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.list, 1)
        lay.addLayout(right, 2)
        self.list.currentRowChanged.connect(self._selected)
        self._selected(-1)

    # -- content --------------------------------------------------------------------------------------
    def set_findings(self, findings: list[Finding], started_ns: int | None = None) -> bool:
        """Show ``findings`` (in their order); keeps the selected code. False when nothing changed."""
        findings = list(findings)
        if findings == self.findings and started_ns == self.started_ns:
            return False
        current = self.current()
        key = (current.code, current.pids) if current is not None else None
        old = self.findings
        self.findings, self.started_ns = findings, started_ns
        self.list.blockSignals(True)
        if len(old) != len(findings):
            self.list.clear()
            for _ in findings:
                self.list.addItem(QListWidgetItem())
            old = []
        for i, f in enumerate(findings):      # rows that changed only (a growing count: one row)
            if i < len(old) and old[i] == f:
                continue
            item = self.list.item(i)
            item.setIcon(badge_icon(f.severity.value))
            item.setText(f.title)
            item.setToolTip(f"[{f.code}] {f.title}")
        # the same finding again; else one with the same code (a growing finding's pid set changed)
        row = next((i for i, f in enumerate(findings) if (f.code, f.pids) == key),
                   next((i for i, f in enumerate(findings) if key and f.code == key[0]), 0 if findings else -1))
        self.list.setCurrentRow(row)
        self.list.blockSignals(False)
        if current is None or not 0 <= row < len(findings) or findings[row] != current:
            self._selected(row)           # the details only when the selected finding changed
        return True

    def set_live(self, live: bool) -> None:
        self.live = live
        self._selected(self.list.currentRow())

    def current(self) -> Finding | None:
        row = self.list.currentRow()
        return self.findings[row] if 0 <= row < len(self.findings) else None

    def select(self, code: str, pid: int | None = None) -> bool:
        """Select the first finding with ``code`` (about ``pid`` when given)."""
        for i, f in enumerate(self.findings):
            if f.code == code and (pid is None or pid in finding_pids(f)):
                self.list.setCurrentRow(i)
                return True
        return False

    # -- internals ------------------------------------------------------------------------------------
    def _selected(self, row: int) -> None:
        f = self.findings[row] if 0 <= row < len(self.findings) else None
        self.detail.setHtml(detail_html(f, self.started_ns) if f is not None else "")
        action = f.action if f is not None else None
        self.apply_button.setVisible(bool(launch_changes(action)))
        if launch_changes(action):
            self.apply_button.setText(f"Apply to next run: {describe(action)}")
        self.stop_button.setVisible(isinstance(action, StopRun) and self.live)
        self.cleanup_button.setVisible(isinstance(action, (CleanupPids, CleanupShm)))
        if isinstance(action, (CleanupPids, CleanupShm)):
            self.cleanup_button.setText(f"{describe(action)[:1].upper()}{describe(action)[1:]}…")
        self.stacks_button.setVisible(f is not None and f.code == STACKS_CODE)
        self.copy_button.setVisible(f is not None)

    def _emit(self, signal) -> None:
        f = self.current()
        if f is not None and f.action is not None:
            signal.emit(f.action)

    def _copy(self) -> None:
        if self.current() is not None:
            QApplication.clipboard().setText(self.detail.toPlainText())


class FindingsStrip(QFrame):
    """The findings of the run shown above the live plots: a head line (counts) and the list. The
    list can be folded away to the head line; a new finding unfolds it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("findingsStrip")
        self.head = QLabel(self)
        self.head.setTextFormat(Qt.TextFormat.RichText)
        self.folded = False
        self.fold_button = QToolButton(self)
        self.fold_button.setAutoRaise(True)
        self.fold_button.clicked.connect(lambda: self.set_folded(not self.folded))
        self.view = FindingsList(self)
        self.view.setMaximumHeight(STRIP_HEIGHT)
        self.view.setMinimumHeight(STRIP_HEIGHT - 50)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.head, 1)
        top.addWidget(self.fold_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.setSpacing(3)
        lay.addLayout(top)
        lay.addWidget(self.view)
        self.folded = False
        self.set_folded(False)
        self.hide()

    @property
    def findings(self) -> list[Finding]:
        return self.view.findings

    def set_folded(self, folded: bool) -> None:
        self.folded = folded
        self.view.setVisible(not folded)
        self.fold_button.setText("Show details ▾" if folded else "Hide details ▴")

    def set_findings(self, findings: list[Finding], started_ns: int | None = None) -> None:
        grew = len(findings) > len(self.view.findings)
        if not self.view.set_findings(findings, started_ns) and self.isHidden() != bool(findings):
            return
        if not findings:
            self.hide()
            return
        if grew and self.folded:             # a new problem: show it
            self.set_folded(False)
        worst = max(f.severity.rank for f in findings)
        background, border = ERROR if worst == 2 else WARN if worst == 1 else INFO
        style = f"#findingsStrip {{ background: {background}; border: 1px solid {border}; }}"
        if self.styleSheet() != style:       # restyling is the costly part of an update
            self.setStyleSheet(style)
        self.head.setText(f"<b>gpuscope found {len(findings)} problem{'s' if len(findings) > 1 else ''}</b> "
                          f"({html.escape(counts_line(findings))}) — select one for its evidence and fix")
        self.show()

    def clear(self) -> None:
        self.view.set_findings([])
        self.set_folded(False)
        self.hide()
