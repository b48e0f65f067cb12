"""The compare view's two tables: metrics (one column per label, median with min–max, the ratio) and
ranges per name (count, total, average per label, the ratio), sortable by their numbers and filterable.

They only display a :class:`gpuscope.analysis.comparison.Comparison`; each number cell keeps the
figure it shows under ``Qt.UserRole`` (tests compare it with ``gpuscope compare --json``).
Rows whose difference is beyond noise (the core's rule) are highlighted.
"""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem

from gpuscope.analysis.verdict import fmt_spread
from gpuscope.views import timeline_text as TT

HIGHLIGHT = QColor(255, 236, 179)      # a difference beyond noise
LEFT_OUT = QColor(130, 130, 130)


RUN_ID = re.compile(r"^\d{8}-(\d{6}-[0-9a-f]{6,})$")


def short_label(label: str) -> str:
    """A label for narrow places: a run id without its date (``042530-bca58ab9``), else as it is."""
    m = RUN_ID.match(label)
    return m.group(1) if m else label


def fmt_ratio(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.2f}×"


class NumItem(QTableWidgetItem):
    """A cell that sorts by the number it holds (None sorts first), not by its text."""

    def __init__(self, text: str, value: float | None) -> None:
        super().__init__(text)
        self.setData(Qt.ItemDataRole.UserRole, value)
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(Qt.ItemDataRole.UserRole), other.data(Qt.ItemDataRole.UserRole)
        if a is None or b is None:
            return a is None and b is not None
        return float(a) < float(b)


class _Table(QTableWidget):
    """Read-only rows, compact, striped."""

    def __init__(self) -> None:
        super().__init__(0, 0)
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.labels: list[str] = []

    def cell(self, row: int, column: int) -> QTableWidgetItem:
        """The item of a filled cell (every cell of these tables is filled)."""
        item = self.item(row, column)
        if item is None:
            raise LookupError(f"no item at ({row}, {column})")
        return item


def _mark(items: list[QTableWidgetItem], beyond: bool) -> None:
    if not beyond:
        return
    bold = QFont()
    bold.setBold(True)
    for it in items:
        it.setBackground(QBrush(HIGHLIGHT))
        it.setFont(bold)
        tip = "beyond noise: the repeats' ranges do not overlap"
        it.setToolTip(f"{it.toolTip()}\n{tip}" if it.toolTip() else tip)


def ratio_title(labels: list[str], label: str | None = None) -> str:
    if len(labels) < 2:
        return "ratio"
    return f"{short_label(label or labels[1])} / {short_label(labels[0])}"


class MetricsTable(_Table):
    """Metric | one column per label (median, min–max over the repeats) | ratio."""

    def set_comparison(self, cmp: Any) -> None:
        self.set_metrics(list(cmp.labels), list(cmp.metrics))

    def set_metrics(self, labels: list[str], metrics: list[Any]) -> None:
        """One row per ``Metric`` (``gpuscope.analysis.comparison``), one column per label, the ratios."""
        self.labels = labels
        self.ratio_labels: list[str | None] = [*self.labels[1:]] or [None]
        columns = ["Metric", *map(short_label, self.labels),
                   *(ratio_title(self.labels, lb) for lb in self.ratio_labels)]
        self.clear()
        self.setColumnCount(len(columns))
        self.setHorizontalHeaderLabels(columns)
        self.setRowCount(len(metrics))
        for r, m in enumerate(metrics):
            name = QTableWidgetItem(m.title or m.name)
            name.setData(Qt.ItemDataRole.UserRole, m.name)
            name.setToolTip(f"{m.help} ({m.name})" if getattr(m, "help", "") else m.name)
            row = [name]
            for label in self.labels:
                spread = m.values.get(label)
                item = NumItem(fmt_spread(spread, m.unit) if spread is not None else "not measured",
                               None if spread is None else spread.median)
                if spread is not None:
                    item.setToolTip(f"median of {spread.n} run(s); min {spread.min:g}, max {spread.max:g} {m.unit}")
                row.append(item)
            for lb in self.ratio_labels:
                q = m.ratio if lb in (None, self.labels[1]) else (getattr(m, "ratios", {}) or {}).get(lb)
                row.append(NumItem(fmt_ratio(q), q))
            _mark(row, m.beyond_noise)
            for c, it in enumerate(row):
                self.setItem(r, c, it)
        self.resizeColumnsToContents()

    def figures(self) -> dict[str, dict[str, float | None]]:
        """metric name -> {label: median shown, "ratio": the first ratio shown} (from the cells)."""
        out: dict[str, dict[str, float | None]] = {}
        for r in range(self.rowCount()):
            name = self.cell(r, 0).data(Qt.ItemDataRole.UserRole)
            d = {label: self.cell(r, 1 + i).data(Qt.ItemDataRole.UserRole) for i, label in enumerate(self.labels)}
            d["ratio"] = self.cell(r, 1 + len(self.labels)).data(Qt.ItemDataRole.UserRole)
            out[name] = d
        return out


class RangesTable(_Table):
    """Name | per label: count, total, average | ratio (of the totals). Sortable; ``set_filter``."""

    def __init__(self) -> None:
        super().__init__()
        self._filter = ""

    def set_comparison(self, cmp: Any) -> None:
        self.labels = list(cmp.labels)
        columns = ["Name"]
        for label in self.labels:
            columns += [f"{short_label(label)} {what}" for what in ("count", "total", "avg")]
        columns.append(ratio_title(self.labels))
        self.setSortingEnabled(False)
        self.clear()
        self.setColumnCount(len(columns))
        self.setHorizontalHeaderLabels(columns)
        self.setRowCount(len(cmp.ranges))
        for r, rr in enumerate(cmp.ranges):
            row: list[QTableWidgetItem] = [QTableWidgetItem(rr.name)]
            for label in self.labels:
                v = rr.values.get(label) or {}
                count, total, avg = v.get("count"), v.get("total_ns"), v.get("avg_ns")
                row.append(NumItem("–" if count is None else f"{count:,}", count))
                total_item = NumItem("–" if total is None else TT.fmt_ns(total), total)
                lo, hi, n = v.get("min_total_ns"), v.get("max_total_ns"), v.get("n")
                if lo is not None and hi is not None:
                    total_item.setToolTip(f"{label}: median of {n} run(s); min {TT.fmt_ns(lo)}, max {TT.fmt_ns(hi)}")
                row.append(total_item)
                row.append(NumItem("–" if avg is None else TT.fmt_ns(avg), avg))
            row.append(NumItem(fmt_ratio(rr.ratio), rr.ratio))
            _mark(row, rr.beyond_noise)

            for c, it in enumerate(row):
                self.setItem(r, c, it)
        self.setSortingEnabled(True)
        self.resizeColumnsToContents()
        self.setColumnWidth(0, max(min(self.columnWidth(0), 320), 160))
        self.set_filter(self._filter)

    def set_filter(self, text: str) -> None:
        """Show only the ranges whose name contains ``text`` (case-insensitive)."""
        self._filter = text
        needle = text.strip().lower()
        for r in range(self.rowCount()):
            name = self.cell(r, 0).text().lower()
            self.setRowHidden(r, bool(needle) and needle not in name)

    def visible_names(self) -> list[str]:
        return [self.cell(r, 0).text() for r in range(self.rowCount()) if not self.isRowHidden(r)]

    def figures(self) -> dict[str, dict[str, Any]]:
        """range name -> {label: {"count", "total_ns", "avg_ns"}, "ratio": ...} (from the cells)."""
        out: dict[str, dict[str, Any]] = {}
        for r in range(self.rowCount()):
            d: dict[str, Any] = {}
            for i, label in enumerate(self.labels):
                c = 1 + 3 * i
                d[label] = {k: self.cell(r, c + j).data(Qt.ItemDataRole.UserRole)
                            for j, k in enumerate(("count", "total_ns", "avg_ns"))}
            d["ratio"] = self.cell(r, 1 + 3 * len(self.labels)).data(Qt.ItemDataRole.UserRole)
            out[self.cell(r, 0).text()] = d
        return out
