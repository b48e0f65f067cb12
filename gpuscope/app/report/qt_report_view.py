"""QtReportView: a report's timeline, summary tables, coverage banner and range details.

The coverage banner lists what nsys missed and nsys's diagnostics as findings, in the app's one
findings list (``qt_findings.FindingsList``, as the live strip).

``open_file(path)`` / ``show_run(run_dir)`` load with :func:`gpuscope.nsys.report.load_report` on
a worker thread (:mod:`gpuscope.app.workers`) behind a progress bar with a Cancel button. The load
is progressive: the summary tables, banner and title appear as soon as the summaries are read
(``sigSummary``), the timeline fills in when its ranges are read and laid out (``sigLoaded``).
``show_report(report)`` shows a report loaded elsewhere (its timeline lanes are still laid out off
the GUI thread). Errors arrive as one line on :attr:`QtReportView.sigError` and in the status line.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gpuscope.app.remote.core import core
from gpuscope.app import bridge, workers
from gpuscope.app.report.qt_summary import QtSummaryTables
from gpuscope.app.timeline.qt_timeline import QtTimeline
from gpuscope.app.widgets.qt_findings import FindingsList
from gpuscope.finding import Finding
from gpuscope.findings.fixes import describe, launch_changes
from gpuscope.trace.coverage import MISSED
from gpuscope.trace.coverage import coverage_findings as _coverage_findings
from gpuscope.trace.summary import RECORD_MARK
from gpuscope.trace.timeline import SOURCE_TORCH
from gpuscope.views import timeline_lod as L
from gpuscope.views import timeline_text as TT

if TYPE_CHECKING:
    from gpuscope.app.report.qt_torch_ops import QtTorchOps
    from gpuscope.fix import Fix

REPORT_FILTER = "Nsight Systems reports (*.nsys-rep *.sqlite);;All files (*)"
SYNC_LAYOUT_ITEMS = 200_000   # a layout short enough for the GUI thread: below it show_report lays out there


def coverage_findings(report: Any) -> list[Finding]:
    """The report's coverage and nsys diagnostics as one list of findings (the format of every other
    finding): one per group of processes nsys missed for the same reason, then nsys's own
    diagnostics (``gpuscope.trace.coverage.coverage_findings``: structured fixes, no text parsed)."""
    return _coverage_findings(getattr(report, "coverage", None), getattr(report, "findings", []) or [])


def one_line(text: str) -> str:
    """An error for the status line: control characters (a junk file's bytes echoed by nsys) shown
    as "?", whitespace runs as one space."""
    clean = "".join(c if c.isprintable() or c in " \t\n" else "?" for c in text)
    return " ".join(clean.split())


def _timeline_in_memory(report):
    """The report's timeline if it is already loaded (``Report.timeline`` may read a cache)."""
    if getattr(report, "loader", None) is not None and getattr(report, "loaded", None) is None:
        return None
    return report.timeline


def _run_flows(report):
    """Pool flow arrows of a run folder's event logs (None for a bare export)."""
    from gpuscope.trace.flows import run_flows

    remote = getattr(report, "remote", None)
    if remote is not None:      # its folder is the host's: the agent reads the event logs there
        return remote.flows()
    path = Path(getattr(report, "path", "") or "")
    return run_flows(path, report.timeline) if path.is_dir() else None


class CoverageBanner(QFrame):
    """A compact yellow strip: one or two lines saying which processes nsys missed and why (and how
    many Nsight Systems diagnostics the report has), "Apply to next run" for the first structured fix,
    and "Details" unfolding the findings in the app's one findings list
    (:class:`~gpuscope.app.widgets.qt_findings.FindingsList`: each one's evidence and fix)."""

    sigFixRequested = Signal(object)   # a gpuscope.fix.Fix (PySide6 signals take no dataclass types)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("coverageBanner")
        self.setStyleSheet("#coverageBanner { background: #fff4cc; border: 1px solid #e0c060; }")
        self.head = QLabel(self)
        self.head.setTextFormat(Qt.TextFormat.RichText)
        self.head.setWordWrap(True)
        self.head.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.apply_button = QPushButton("Apply to next run", self)
        self.apply_button.clicked.connect(self._apply)
        self.folded = True
        self.fold_button = QToolButton(self)
        self.fold_button.setAutoRaise(True)
        self.fold_button.clicked.connect(lambda: self.set_folded(not self.folded))
        self.view = FindingsList(self)
        self.view.setMaximumHeight(160)
        self.view.setMinimumHeight(110)
        self.view.sigApplyFix.connect(self.sigFixRequested)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.head, 1)
        top.addWidget(self.apply_button, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.fold_button, 0, Qt.AlignmentFlag.AlignTop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 3, 8, 3)
        lay.setSpacing(3)
        lay.addLayout(top)
        lay.addWidget(self.view)
        self.findings: list[Finding] = []
        self.fixes: list[str] = []         # the fix texts, in order
        self.action: Fix | None = None     # the first structured fix the launch panel can apply
        self.folded = True
        self.set_folded(True)
        self.hide()

    def set_folded(self, folded: bool) -> None:
        """Folded (the default): the head line only; unfolded: the findings with evidence and fix."""
        self.folded = folded
        self.view.setVisible(not folded)
        self.fold_button.setText("Details ▾" if folded else "Hide details ▴")
        # unfolded, the list's own button applies the selected finding's fix: one button at a time
        self.apply_button.setVisible(folded and self.action is not None)

    def show_report(self, report) -> None:
        self.findings = coverage_findings(report) if report is not None else []
        self.fixes = list(dict.fromkeys(f.fix for f in self.findings if f.fix))
        self.action = next((f.action for f in self.findings if launch_changes(f.action)), None)
        self.view.set_findings(self.findings)
        self.head.setText(head_line(report, self.findings))
        self.apply_button.setVisible(self.folded and self.action is not None)
        if self.action is not None:
            self.apply_button.setText(f"Apply to next run: {describe(self.action)}")
        self.setVisible(bool(self.findings))

    def _apply(self) -> None:
        if self.action is not None:
            self.sigFixRequested.emit(self.action)

    def plain_text(self) -> str:
        """Every finding's title and fix (what the user can read in the list and its details)."""
        return "\n".join(f"{f.title}\nFix: {f.fix}" for f in self.findings)


def head_line(report, findings: list[Finding]) -> str:
    """The banner's folded text: who nsys missed and the first reason, what the report shows instead,
    and how many diagnostics there are (rich text, one or two lines)."""
    missed = [f for f in findings if f.code == MISSED]
    parts = []
    if missed:
        procs = list(getattr(getattr(report, "coverage", None), "missing", []))
        reason = (procs[0].reason or "").split(";")[0].split(" (")[0] if procs else ""
        drawn = sum(p.gpuscope_ranges for p in procs if p.status == "missing")
        text = f"nsys did not see the ranges of {sum(len(f.pids) for f in missed)} process(es) of this run"
        parts.append(f"<b>⚠ {html.escape(text)}</b>" + (f" ({html.escape(reason)})" if reason else ""))
        if drawn:
            parts.append(f"their {drawn:,} ranges are drawn from gpuscope's own records (hatched), "
                         f"in the tables as “{html.escape(RECORD_MARK)}”")
    others = len(findings) - len(missed)
    if others:
        parts.append(f"<b>{others} Nsight Systems diagnostic(s)</b>")
    return " — ".join(parts)


def counts_text(report) -> str:
    """What the whole report holds ("N ranges, M kernels"): a remote report's counts are the host's,
    not the rows pulled so far (zooming pulls more; the title stays the same, as for a local one)."""
    held = getattr(getattr(report, "remote", None), "counts", None)
    if held:
        return f"{int(held.get('ranges', 0)):,} ranges, {int(held.get('kernels', 0)):,} kernels"
    tl = report.timeline
    torch = int((tl.ranges.source == SOURCE_TORCH).sum())   # a run's PyTorch profiler events, counted apart
    return f"{len(tl.ranges) - torch:,} ranges, {len(tl.kernels):,} kernels" + \
        (f", {torch:,} torch events" if torch else "")


TABLES_KEY = "report/tables_height"   # QSettings: the tables' height (px) the user dragged them to
TABLES_SHARE = 0.35       # the tables' default share of the area under the banner
TABLES_MAX_SHARE = 0.5    # never more (also for a remembered height): the timeline keeps the larger share
TIMELINE_MIN_H = 90


class _Split(QSplitter):
    """A splitter that calls ``on_resize`` after laying out its own new size."""

    def __init__(self, orientation, on_resize, parent: QWidget | None = None) -> None:
        super().__init__(orientation, parent)
        self._on_resize = on_resize

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._on_resize()


class QtReportView(QWidget):
    """Title and a compact coverage banner; the timeline gets the space; under it the summary tables
    and the selected range's details, in a panel whose height the user drags and the app remembers
    (``TABLES_KEY`` in the window's QSettings)."""

    sigError = Signal(str)
    sigSummary = Signal(object)      # a Report's summaries are shown; its timeline is still loading
    sigLoaded = Signal(object)       # the Report now shown, timeline included
    sigRangeSelected = Signal(dict)
    sigFixRequested = Signal(object)  # a gpuscope.fix.Fix: the banner's "Apply fix to next run"

    def __init__(self, parent: QWidget | None = None, settings: QSettings | None = None) -> None:
        super().__init__(parent)
        bridge.install()
        self.report: Any = None
        self.torch_ops: QtTorchOps | None = None   # the Torch ops tab of a run with PyTorch profiler traces
        self._task: workers.Task | None = None
        self._settings = settings
        self._own_settings: QSettings | None = None
        self.title = QLabel("No report loaded. File → Open report…", self)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # a long path must not set the view's minimum width (the window goes down to 800 px)
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.busy_label = QLabel(self)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 0)          # load_report gives no fraction: a busy bar
        self.progress.setMaximumHeight(14)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        busy = QHBoxLayout()
        busy.addWidget(self.busy_label)
        busy.addWidget(self.progress, 1)
        busy.addWidget(self.cancel_button)
        self.busy_row = QWidget(self)
        self.busy_row.setLayout(busy)
        self.busy_row.hide()
        self.banner = CoverageBanner(self)
        self.timeline = QtTimeline(parent=self)
        self.timeline.setMinimumHeight(TIMELINE_MIN_H)
        self.summary = QtSummaryTables(self)
        self.details = QTextBrowser(self)
        self.details.setPlaceholderText("Click a range in the timeline to see its details.")
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._build_layout()
        self.timeline.sigRangeSelected.connect(self._range_selected)
        self.timeline.sigMeasured.connect(self._measured)
        self.banner.sigFixRequested.connect(self.sigFixRequested)

    def _build_layout(self) -> None:
        below = QSplitter(Qt.Orientation.Horizontal, self)
        below.addWidget(self.summary)
        below.addWidget(self.details)
        below.setStretchFactor(0, 3)
        below.setStretchFactor(1, 1)
        self.tables_panel = below
        split = _Split(Qt.Orientation.Vertical, self._place_tables, self)
        split.addWidget(self.timeline)
        split.addWidget(below)
        split.setStretchFactor(0, 1)        # a taller window grows the timeline; the tables keep their height
        split.setStretchFactor(1, 0)
        split.setCollapsible(0, False)
        split.splitterMoved.connect(self._tables_dragged)
        self._split = split
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addWidget(self.title)
        lay.addWidget(self.busy_row)
        lay.addWidget(self.banner)
        lay.addWidget(split, 1)
        lay.addWidget(self.status)

    # ----------------------------------------------------------------- the tables' height

    def settings(self) -> QSettings:
        """The settings the tables' height is kept in: the one given, else the window's (asked each
        time: the main window adopts this view after building it), else the app's."""
        if self._settings is not None:
            return self._settings
        own = getattr(self.window(), "settings", None)
        if isinstance(own, QSettings):
            return own
        if self._own_settings is None:
            from gpuscope.app.settings import open_settings

            self._own_settings = open_settings()
        return self._own_settings

    def remembered_tables_height(self) -> int | None:
        raw = self.settings().value(TABLES_KEY)
        try:
            return int(raw) if raw is not None else None
        except (TypeError, ValueError):
            return None

    def tables_height(self) -> int:
        return self._split.sizes()[1]

    def _tables_dragged(self, _pos: int, _index: int) -> None:
        self.settings().setValue(TABLES_KEY, self.tables_height())

    def _place_tables(self) -> None:
        """The tables get the height the user chose last (at most ``TABLES_MAX_SHARE``), else
        ``TABLES_SHARE``; the timeline gets the rest."""
        total = sum(self._split.sizes())
        if total <= 0:
            return
        want = self.remembered_tables_height()
        if want is None:
            want = int(total * TABLES_SHARE)
        want = max(0, min(want, int(total * TABLES_MAX_SHARE), total - TIMELINE_MIN_H))
        if self._split.sizes()[1] != want:
            self._split.setSizes([total - want, want])

    # ----------------------------------------------------------------- loading

    @property
    def busy(self) -> bool:
        return self._task is not None

    def open_dialog(self) -> None:
        """File → Open report: pick a .nsys-rep / .sqlite and load it."""
        path, _ = QFileDialog.getOpenFileName(self, "Open a report", str(Path.home()), REPORT_FILTER)
        if path:
            self.open_file(path)

    def open_file(self, path: str | Path) -> None:
        """Load a .nsys-rep (exported first), a .sqlite export or a run folder, off the GUI thread."""
        p = Path(path)
        self._start(lambda task: self._load(task, p), f"Loading {p.name}…")

    def show_run(self, run_dir: str | Path) -> None:
        """Load a gpuscope run folder: its nsys export with coverage, or its event logs alone."""
        self.open_file(run_dir)

    def show_report(self, report) -> None:
        """Show an already loaded report. Small timelines are laid out at once; above
        ``SYNC_LAYOUT_ITEMS`` items (or not read yet) the summaries show first and the lanes are
        built on a worker thread (``sigLoaded`` says when)."""
        tl = _timeline_in_memory(report)
        if tl is not None and len(tl.ranges) + len(tl.kernels) + len(tl.memops) + len(tl.marks) <= SYNC_LAYOUT_ITEMS:
            if self._task is not None:
                self._task.cancel()
            layout = L.build_layout(tl)
            layout.flows = _run_flows(report)
            self._loaded((report, layout))
            return
        self._start(lambda task: self._lay_out(task, report), "Laying out the timeline…")

    @classmethod
    def _load(cls, task: workers.Task, path: Path):
        task.progress(f"Reading {path.name}…")
        report = core().load_report(path, cancel=task.cancel_event)  # Cancel also stops a running nsys export
        if task.cancelled:
            return None
        return cls._lay_out(task, report)

    @staticmethod
    def _lay_out(task: workers.Task, report):
        """Summaries to the GUI now, then read (if not yet) and lay out the timeline."""
        task.partial(report)
        if _timeline_in_memory(report) is None:
            task.progress("Reading the timeline…")
        tl = report.timeline
        if task.cancelled:
            return None
        task.progress(f"Laying out {len(tl.ranges):,} ranges…")
        layout = L.build_layout(tl)
        layout.flows = _run_flows(report)
        return report, layout

    def _start(self, fn, label: str) -> None:
        if self._task is not None:
            self._task.cancel()
        self.busy_label.setText(label)
        self.busy_row.show()
        self.status.setText("")
        self._task = workers.submit(fn, on_done=self._loaded, on_error=self._failed,
                                    on_progress=self.busy_label.setText, on_partial=self._summary_ready,
                                    label="loading report")

    def _summary_ready(self, report) -> None:
        """First paint of a report: tables, banner and title while its timeline is still read."""
        if self._task is None:
            return
        self.report = report
        self.timeline.set_layout(None)
        self._show_tables(report, "timeline loading…")
        self.sigSummary.emit(report)

    def _show_tables(self, report, ranges: str) -> None:
        self.summary.show_report(report)
        self._wire_summary_rows()
        self._show_torch(report)
        self.banner.show_report(report)
        self.details.clear()
        version = f"nsys {report.nsys_version}" if report.nsys_version else "gpuscope event logs"
        self.title.setText(f"<b>{html.escape(str(report.path))}</b> — {html.escape(version)}, "
                           f"{ranges}, {len(report.processes)} processes")
        self.title.setToolTip(str(report.path))
        self._set_status(" ".join(f"Note: {n}" for n in report.notes))

    def cancel(self) -> None:
        """Stop waiting for the load in progress; the view stays as it was."""
        if self._task is None:
            return
        self._task.cancel()
        self._task = None
        self.busy_row.hide()
        self._set_status("Loading cancelled.")

    def _loaded(self, result) -> None:
        self._task = None
        self.busy_row.hide()
        if result is None:
            return
        report, layout = result
        summary_shown = report is self.report and "timeline loading…" in self.title.text()
        self.report = report
        self.timeline.set_layout(layout)
        self._place_tables()
        counts = counts_text(report)
        if summary_shown:   # progressive load: the tables are up, only the title changes
            self.title.setText(self.title.text().replace("timeline loading…", counts))
            if self.torch_ops is None and getattr(report, "torch", None) is not None:
                self._show_torch(report)   # the traces were read with the timeline
        else:
            self._show_tables(report, counts)
        self.sigLoaded.emit(report)

    def _failed(self, text: str) -> None:
        text = one_line(text)
        self._task = None
        self.busy_row.hide()
        self._set_status(text, error=True)
        self.sigError.emit(text)

    def _set_status(self, text: str, error: bool = False) -> None:
        """An error wraps, to be read whole; notes keep to one line (all of it in the tooltip), so
        they take no height from the timeline."""
        self.status.setStyleSheet("color: #b00020;" if error else "color: #444;")
        self.status.setWordWrap(error)
        self.status.setText(text)
        self.status.setToolTip(text)

    # ----------------------------------------------------------------- summary row -> timeline

    def _wire_summary_rows(self) -> None:
        """A click (or Enter) on a summary row highlights its items on the timeline and shows the
        longest (QtTimeline.highlight_name); the tables are made anew for each report."""
        for key, table in self.summary.tables.items():
            for sig in (table.view.clicked, table.view.activated):
                sig.connect(lambda index, k=key, t=table: self._summary_row_chosen(k, t, index))

    def _summary_row_chosen(self, key: str, table, index) -> None:
        row = table.model.rows[table.proxy.mapToSource(index).row()]
        name = getattr(row, "name", None)
        if name is not None and self.report is not None:
            self.timeline.highlight_name(key, name, self.report.naming)

    def _show_torch(self, report) -> None:
        """The Torch ops tab (second, after the NVTX ranges) for a run with PyTorch profiler traces."""
        torch = getattr(report, "torch", None)
        if self.torch_ops is not None:   # the last report's tab: its traces' columns go with it
            self.torch_ops.deleteLater()
        self.torch_ops = None
        if torch is None:
            return
        from gpuscope.app.report.qt_torch_ops import QtTorchOps

        self.torch_ops = QtTorchOps(self.summary)
        self.torch_ops.show_torch(torch)
        self.torch_ops.sigHighlight.connect(self.timeline.highlight)
        self.summary.insertTab(min(1, self.summary.count()), self.torch_ops, f"Torch ops ({len(torch.ranks)} ranks)")

    def _measured(self, m) -> None:
        """A measured span (shift+drag on the timeline) in the details pane; None: cleared."""
        if m is None:
            self.details.clear()
            return
        self.details.setHtml(TT.measure_html(m))

    # ----------------------------------------------------------------- selection

    def _range_selected(self, d: dict) -> None:
        rows = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
                       for k, v in TT.detail_pairs(d))
        self.details.setHtml(f"<h3>{html.escape(str(d['name']))}</h3><p>{html.escape(d['kind'])}</p>"
                             f"<table cellspacing=4>{rows}</table>")
        if self.torch_ops is not None:   # a torch event: its row in the Torch ops tab
            self.torch_ops.show_event(d)
        self.sigRangeSelected.emit(d)
