"""The Compare tab: runs side by side (fork vs spawn, before vs after), as the core computed them.

From the top: the verdict (one or two sentences from :mod:`gpuscope.analysis.comparison`), warnings
and the runs left out of the medians; the metrics (one column per label: median with min–max over
the repeats, and the ratio); start-up phases per worker as bars; the representative run of each
label as timelines stacked on one shared, synchronised time axis; the ranges per name, sortable and
filterable. Differences beyond noise are highlighted. Export writes the core's Markdown (with
pictures of the timelines and start-up bars beside it) or JSON.

The view displays; it computes nothing. Timelines load off the GUI thread (``app/workers.py``);
``sigShown(comparison)`` fires once everything, timelines included, is on screen.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from gpuscope.app.remote.core import core
from gpuscope.app import bridge, workers
from gpuscope.app.compare.qt_compare_startup import QtStartupBars
from gpuscope.app.compare.qt_compare_tables import MetricsTable, RangesTable
from gpuscope.app.compare.qt_compare_timelines import QtStackedTimelines, load_layouts
from gpuscope.app.widgets.qt_findings import FindingsList
from gpuscope.finding import Finding

WARN_STYLE = ("color: #8a4500; background: #fff3cd; border: 1px solid #e0b252; border-radius: 3px; "
              "padding: 4px;")
EMPTY_TEXT = ("Nothing compared yet. Run tab → Compare start methods; or History → select two or more runs → "
              "Compare; or File → Compare runs…")


def _section(title: str, widget: QWidget, *extra: QWidget) -> QWidget:
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 2, 0, 0)
    lay.setSpacing(2)
    head = QHBoxLayout()
    label = QLabel(title)
    label.setStyleSheet("font-weight: bold;")
    head.addWidget(label)
    for w in extra:
        head.addWidget(w)
    head.addStretch(1)
    lay.addLayout(head)
    lay.addWidget(widget, 1)
    return box


def findings_by_label(cmp: Any) -> list[Finding]:
    """The findings saved with each compared run, once per label and code, titled with their label
    ("[spawn] ..."), errors first."""
    out: dict[tuple[str, str], Finding] = {}
    for label in cmp.labels:
        for run_id in cmp.runs.get(label, []):
            folder = cmp.run_dirs.get(run_id)
            for f in core().saved_findings(folder) if folder else []:
                key = (label, f.code)
                if key not in out:
                    title = f.title if len(cmp.labels) < 2 else f"[{label}] {f.title}"
                    out[key] = replace(f, title=title)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(out.values(), key=lambda f: order.get(f.severity.value, 3))


class QtCompareView(QWidget):
    """``show_comparison(cmp)``; signals ``sigShown(cmp)`` and ``sigError(text)``."""

    sigShown = Signal(object)
    sigError = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        bridge.install()
        self.comparison: Any = None
        self._task: workers.Task | None = None
        self.verdict = QLabel(EMPTY_TEXT, wordWrap=True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = self.verdict.font()
        font.setPointSizeF(font.pointSizeF() * 1.2)
        font.setBold(True)
        self.verdict.setFont(font)
        self.runs_line = QLabel(wordWrap=True)
        self.runs_line.setStyleSheet("color: palette(dark);")
        self.runs_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warnings = QLabel(wordWrap=True)
        self.warnings.setStyleSheet(WARN_STYLE)
        self.warnings.hide()
        self.notes = QLabel(wordWrap=True)
        self.notes.setStyleSheet("color: palette(dark);")
        self.notes.hide()
        self.findings = FindingsList()      # what the assistant found in the compared runs, per label
        self.findings.setMaximumHeight(150)
        self.findings.hide()
        self.export_md = QPushButton("Export Markdown…")
        self.export_md.setToolTip("The comparison as Markdown, with pictures of the timelines and start-up bars")
        self.export_json = QPushButton("Export JSON…")
        self.export_json.setToolTip("The comparison as JSON (what `gpuscope compare --json` prints)")
        self.export_md.clicked.connect(self._ask_markdown)
        self.export_json.clicked.connect(self._ask_json)
        self.metrics = MetricsTable()
        self.breakdown = MetricsTable()     # the wall time's parts, in the order a run goes through them
        self.startup = QtStartupBars()
        self.timelines = QtStackedTimelines()
        self.ranges = RangesTable()
        self.filter = QLineEdit(placeholderText="filter by name")
        self.filter.setClearButtonEnabled(True)
        self.filter.setMaximumWidth(260)
        self.filter.textChanged.connect(self.ranges.set_filter)
        self._build()
        self._set_enabled(False)

    def _build(self) -> None:
        head = QHBoxLayout()
        text = QVBoxLayout()
        text.addWidget(self.verdict)
        text.addWidget(self.runs_line)
        head.addLayout(text, 1)
        head.addWidget(self.export_md, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.export_json, 0, Qt.AlignmentFlag.AlignTop)
        top = QSplitter(Qt.Orientation.Horizontal)
        self.metric_tabs = QTabWidget()
        self.metric_tabs.setDocumentMode(True)
        self.metric_tabs.addTab(self.metrics, "Metrics")
        self.metric_tabs.addTab(self.breakdown, "Where the wall time goes")
        self.metric_tabs.setTabToolTip(1, "The wall time cut into consecutive parts (main program's start, "
                                          "starting the workers, their interpreter, gpuscope's hook, re-importing "
                                          "__main__, set-up to the first task, the tasks, the end): where a "
                                          "difference comes from")
        top.addWidget(_section("Median over the repeats, min–max in brackets", self.metric_tabs))
        bars = QScrollArea(widgetResizable=True)     # many workers: the bars scroll
        bars.setFrameShape(QFrame.Shape.NoFrame)
        bars.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        bars.setWidget(self.startup)
        top.addWidget(_section("Start-up per worker", bars))
        top.setSizes([800, 480])
        self.top_split = top
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(top)
        self.split.addWidget(_section("Timelines", self.timelines))
        self.split.addWidget(_section("Ranges per name (differences beyond noise highlighted)", self.ranges,
                                      self.filter))
        self.split.setSizes([230, 300, 200])
        lay = QVBoxLayout(self)
        lay.addLayout(head)
        lay.addWidget(self.warnings)
        lay.addWidget(self.notes)
        lay.addWidget(self.findings)
        lay.addWidget(self.split, 1)

    def _set_enabled(self, on: bool) -> None:
        self.export_md.setEnabled(on)
        self.export_json.setEnabled(on)

    # -- showing --------------------------------------------------------------------------------
    def show_busy(self, text: str) -> None:
        """A line in place of the verdict while a series runs or a comparison is computed."""
        self.verdict.setText(text)

    def show_comparison(self, cmp: Any) -> None:
        """Fill the tables now; the timelines load on a pool thread, then ``sigShown``."""
        self.comparison = cmp
        self.verdict.setText(cmp.verdict)
        runs = []
        for label in cmp.labels:
            ids = cmp.runs.get(label, [])
            kept = [i for i in ids if i not in cmp.left_out]
            if ids == [label]:        # the label is the run itself
                text = f"run {label}"
            else:
                text = f"{label}: {len(kept)} run(s)" + (f" ({', '.join(kept)})" if 0 < len(kept) <= 3 else "")
            left = len(ids) - len(kept)
            runs.append(text + (f", {left} left out of the medians" if left else ""))
        self.runs_line.setText(" · ".join(runs))
        # the core's warnings say which runs are left out and why
        self.warnings.setText("\n".join(f"⚠ {n}" for n in cmp.warnings))
        self.warnings.setVisible(bool(cmp.warnings))
        notes = list(getattr(cmp, "notes", []) or [])
        self.notes.setText("\n".join(notes))
        self.notes.setVisible(bool(notes))
        found = findings_by_label(cmp)
        self.findings.set_findings(found)
        self.findings.setVisible(bool(found))
        self.metrics.set_comparison(cmp)
        parts = list(getattr(cmp, "breakdown", []) or [])
        self.breakdown.set_metrics(list(cmp.labels), parts)
        self.metric_tabs.setTabVisible(1, bool(parts))
        self.ranges.set_comparison(cmp)
        self.startup.set_startup(cmp.startup, cmp.labels)
        self._fit_sections()
        self._set_enabled(True)
        self._load_timelines(cmp)

    def _fit_sections(self) -> None:
        """Heights by content: the ranges table as tall as its rows (up to 6), the timelines the rest."""
        total = sum(self.split.sizes()) or 700
        row = self.ranges.verticalHeader().defaultSectionSize()
        ranges = 2 * row + 30 + min(max(self.ranges.rowCount(), 2), 6) * row
        metrics = 2 * row + 30 + min(max(self.metrics.rowCount(), 4), 9) * row
        top = max(metrics, min(self.startup.minimumHeight(), 10 * row) + 30)
        self.split.setSizes([top, max(200, total - top - ranges), ranges])

    def _load_timelines(self, cmp: Any) -> None:
        if self._task is not None:
            self._task.cancel()
        dirs = {label: cmp.run_dirs[rid] for label, rid in cmp.representative.items() if rid in cmp.run_dirs}
        self.timelines.clear("Timelines: loading…" if dirs else "Timelines: no representative run to show")
        if not dirs:
            self.sigShown.emit(cmp)
            return
        titles = {label: (f"run {label}" if cmp.representative[label] == label else
                          f"{label} · run {cmp.representative[label]} (representative)") for label in dirs}

        def done(layouts: dict[str, Any]) -> None:
            self._task = None
            self.timelines.set_layouts(layouts, titles)
            self.sigShown.emit(cmp)

        def failed(text: str) -> None:
            self._task = None
            self.timelines.clear(f"Timelines: {text}")
            self.sigShown.emit(cmp)

        self._task = workers.submit(lambda task: load_layouts(dirs, task.cancel_event), on_done=done,
                                    on_error=failed, label="loading the compared timelines")

    # -- export ---------------------------------------------------------------------------------
    def _ask_markdown(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the comparison as Markdown", "comparison.md",
                                              "Markdown (*.md)")
        if path:
            self._export(lambda: self.export_markdown(path))

    def _ask_json(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the comparison as JSON", "comparison.json",
                                              "JSON (*.json)")
        if path:
            self._export(lambda: self.export_json_to(path))

    def _export(self, fn: Any) -> None:
        try:
            fn()
        except OSError as exc:
            self.sigError.emit(f"cannot write the export: {exc.strerror or exc}")

    def export_markdown(self, path: str | Path) -> list[Path]:
        """The core's Markdown with pictures of the timelines and start-up bars beside it; the files written."""
        path = Path(path)
        figures: dict[str, str] = {}
        written = [path]
        for name, caption, widget in (
                ("timelines", "Timelines: one representative run per label, shared time axis", self.timelines),
                ("startup", "Start-up per worker", self.startup)):
            png = path.with_name(f"{path.stem}-{name}.png")
            if widget.width() > 10 and widget.grab().save(str(png)):
                figures[caption] = png.name
                written.append(png)
        path.write_text(self.comparison.to_markdown(figures), encoding="utf-8")
        return written

    def export_json_to(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.comparison.to_json(), indent=2) + "\n", encoding="utf-8")
        return path
