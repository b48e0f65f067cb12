"""QtSummaryTables: tabs of sortable tables with the summaries of a report.

The rows are the core's (:mod:`gpuscope.trace.summary`, via ``Report.summaries``,
``Report.processes``, ``Report.coverage``): the same objects ``gpuscope report`` prints, shown
with the same formatting. Sorting is numeric on the raw values (``Qt.UserRole``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QLineEdit, QTableView, QTabWidget,
                               QVBoxLayout, QWidget)

from gpuscope.app.widgets.qt_elided_label import ElidedLabel

from gpuscope.trace.summary import RECORD_MARK, source_text

RAW_ROLE = Qt.ItemDataRole.UserRole
_ROOT = QModelIndex()     # the invisible root: a table's rows have no parent


@dataclass(frozen=True)
class Column:
    """A summary table's column: its title, the value it sorts on and the text it shows."""

    title: str
    raw: Callable[[Any], Any]                 # the value sorted on
    text: Callable[[Any], str] | None = None  # the value shown (default: str(raw))
    numeric: bool = True


def _g(name: str) -> Callable[[Any], Any]:
    return lambda r: r.get(name) if isinstance(r, dict) else getattr(r, name, None)


# Same headers and formats as gpuscope.commands.report._summary_table.
SUMMARY_COLUMNS = [
    Column("Time (%)", _g("time_pct"), lambda v: f"{v:.1f}"),
    Column("Total (ns)", _g("total_ns"), lambda v: f"{v:,}"),
    Column("Count", _g("count"), lambda v: f"{v:,}"),
    Column("Avg (ns)", _g("avg_ns"), lambda v: f"{v:,.1f}"),
    Column("Med (ns)", _g("med_ns"), lambda v: f"{v:,.1f}"),
    Column("Min (ns)", _g("min_ns"), lambda v: f"{v:,}"),
    Column("Max (ns)", _g("max_ns"), lambda v: f"{v:,}"),
    Column("StdDev (ns)", _g("stddev_ns"), lambda v: f"{v:,.1f}"),
]
STYLE_COLUMN = Column("Style", _g("style"), numeric=False)
GRID_COLUMNS = [Column("GridXYZ", _g("grid"), numeric=False), Column("BlockXYZ", _g("block"), numeric=False)]
NAME_COLUMN = Column("Name", lambda r: r.name or "", numeric=False)
NAME_WIDTH = 320          # px at most for the first column at first (long kernel names); the user can widen it
# Rows of ranges nsys did not record, from gpuscope's own records (a run whose processes nsys missed):
# marked in this column and tinted like the timeline's gpuscope badge.
SOURCE_COLUMN = Column("Source", source_text, numeric=False)
RECORD_TINT = QColor("#fff4cc")

PROCESS_COLUMNS = [
    Column("PID", _g("pid"), str), Column("Process", _g("name"), numeric=False),
    Column("NVTX ranges", _g("nvtx_ranges")), Column("gpuscope ranges", _g("gpuscope_ranges")),
    Column("Marks", _g("marks")), Column("Kernels", _g("kernels")), Column("Memory ops", _g("memops")),
    Column("CUDA API calls", _g("cuda_api_calls")), Column("OS calls", _g("osrt_calls")),
    Column("Threads", _g("threads")),
    Column("Sources", lambda r: ", ".join(r.get("sources", [])), numeric=False),
]

def _ms(v) -> str:
    return "-" if v is None else f"{v / 1e6:,.3f}"


def _step(name: str) -> Callable[[Any], Any]:
    return lambda r: (r.get("step") or {}).get(name)


# A job across nodes (Report.job, docs/MULTINODE.md): same headers and formats as `gpuscope report DIR`.
RANK_COLUMNS = [
    Column("Rank", _g("rank"), str), Column("Node", lambda r: r["node"]["node_rank"], str),
    Column("Host", lambda r: r["node"]["host"], numeric=False), Column("PID", _g("pid"), str),
    Column("Ranges", _g("ranges")), Column("First (ms)", _g("first_ns"), _ms), Column("Last (ms)", _g("last_ns"), _ms),
    Column("Steps", _step("count"), lambda v: "-" if v is None else str(v)),
    Column("Step median (ms)", _step("median_ns"), _ms), Column("Step max (ms)", _step("max_ns"), _ms),
]
NODE_COLUMNS = [
    Column("Node", _g("node_rank"), str), Column("Host", _g("host"), numeric=False),
    Column("Ranks", lambda r: ",".join(map(str, r["ranks"])) or "-", numeric=False),
    Column("Clock offset (ms)", _g("clock_offset_ns"), _ms),
    Column("Residual (ms)", _g("clock_residual_ns"), _ms),
    Column("Drift (µs)", _g("clock_drift_ns"), lambda v: f"{v / 1e3:+,.1f}"),
    Column("Clock", lambda r: r.get("clock_error") or r.get("clock_reference") or "", numeric=False),
    Column("Exit", _g("exit_code"), str), Column("nsys", lambda r: "yes" if r.get("nsys") else "no", numeric=False),
    Column("Run", _g("run_id"), numeric=False),
]

COVERAGE_COLUMNS = [
    Column("PID", _g("pid"), str), Column("Role", _g("role"), numeric=False),
    Column("Start", lambda r: r.start_method or "", numeric=False),
    Column("gpuscope", _g("gpuscope_ranges")), Column("nsys", _g("nsys_ranges")),
    Column("Lost", _g("lost")), Column("Status", _g("status"), numeric=False),
    Column("Why", lambda r: r.reason or "", numeric=False), Column("Fix", lambda r: r.fix or "", numeric=False),
]

# (key in Report.summaries, tab title), the order `gpuscope report` prints them in.
SUMMARY_TABS = (("nvtx", "NVTX ranges"), ("kernel", "CUDA kernels"), ("cuda_api", "CUDA API"),
                ("memop", "CUDA memcpy/memset"), ("osrt", "OS runtime"))


def summary_columns(rows: list) -> list[Column]:
    """The columns `gpuscope report` prints for these rows (Style / grid+block when present, Source
    when some rows are gpuscope's records), with the name first: the column a reader looks for must
    not be scrolled out of a narrow table (the CLI prints it last, as nsys stats does)."""
    first = [NAME_COLUMN]
    if any(getattr(r, "source", None) for r in rows):
        first.append(SOURCE_COLUMN)
    extra = []
    if rows and getattr(rows[0], "style", None):
        extra.append(STYLE_COLUMN)
    if rows and getattr(rows[0], "grid", None):
        extra += GRID_COLUMNS
    return first + SUMMARY_COLUMNS + extra


def records_note(rows: list) -> str:
    """The line above a summary with rows from gpuscope's records: how many ranges, and why."""
    own = [r for r in rows if getattr(r, "source", None)]
    if not own:
        return ""
    n, total = sum(r.count for r in own), sum(r.count for r in rows)
    return (f"{n:,} of {total:,} ranges: gpuscope's own records of processes nsys did not record (tinted rows, "
            f"“{RECORD_MARK}”, hatched in the timeline). nsys's rows equal nsys stats; Time (%) is within "
            "each source.")


class RowsModel(QAbstractTableModel):
    """A read-only table of row objects (dataclasses or dicts) described by :class:`Column` s."""

    def __init__(self, columns: list[Column], rows: list | None = None, parent=None) -> None:
        super().__init__(parent)
        self.columns = columns
        self.rows = list(rows or [])

    def set_rows(self, rows: list) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section].title
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        col, row = self.columns[index.column()], self.rows[index.row()]
        if role == RAW_ROLE:
            v = col.raw(row)
            return v if v is not None else (float("-inf") if col.numeric else "")
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            v = col.raw(row)
            if v is None:
                return ""
            return col.text(v) if col.text else str(v)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            side = Qt.AlignmentFlag.AlignRight if col.numeric else Qt.AlignmentFlag.AlignLeft
            return int(side | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.BackgroundRole and getattr(row, "source", None):
            return RECORD_TINT
        return None


class RawSortProxy(QSortFilterProxyModel):
    """Sorts on the raw value (``RAW_ROLE``: numbers as numbers); filters on any text column."""

    def lessThan(self, left: QModelIndex | QPersistentModelIndex,
                 right: QModelIndex | QPersistentModelIndex) -> bool:
        a, b = left.data(RAW_ROLE), right.data(RAW_ROLE)
        try:
            return a < b
        except TypeError:
            return str(a) < str(b)


class SummaryTable(QWidget):
    """A filter box over one sortable table."""

    def __init__(self, columns: list[Column], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = RowsModel(columns, parent=self)
        self.proxy = RawSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(-1)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.view.verticalHeader().setVisible(False)
        self.view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.view.horizontalHeader().setStretchLastSection(True)
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.note = ElidedLabel(self)   # what the rows hold beyond the obvious (records_note); one line
        self.note.setStyleSheet("color: #6b5400;")
        self.note.hide()
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.filter, 1)
        top.addWidget(self.note, 3)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.view)

    def set_note(self, text: str) -> None:
        """A line beside the filter (the whole text in its tooltip); none when ``text`` is empty."""
        self.note.set_full_text(text)
        self.note.setVisible(bool(text))

    def set_rows(self, rows: list, columns: list[Column] | None = None) -> None:
        if columns is not None and columns != self.model.columns:
            self.model.beginResetModel()
            self.model.columns = columns
            self.model.endResetModel()
        self.model.set_rows(rows)
        self.view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)   # the core's order until the user sorts
        self.proxy.sort(-1)
        self.view.resizeColumnsToContents()
        if self.model.columns and self.model.columns[0] is NAME_COLUMN:
            self.view.setColumnWidth(0, min(self.view.columnWidth(0), NAME_WIDTH))

    def column_values(self, title: str, role: int = Qt.ItemDataRole.DisplayRole) -> list:
        """The values of a column in display order (tests and the app's copy actions)."""
        c = [col.title for col in self.model.columns].index(title)
        return [self.proxy.index(r, c).data(role) for r in range(self.proxy.rowCount())]


class QtSummaryTables(QTabWidget):
    """Tabs: NVTX ranges, CUDA kernels, CUDA API, memcpy/memset, OS runtime, Processes, Coverage."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tables: dict[str, SummaryTable] = {}
        self._empty = QLabel("No report loaded.", self)
        self._empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.addTab(self._empty, "Summary")

    def show_report(self, report) -> None:
        """Fill the tabs from a :class:`gpuscope.nsys.report.Report`; tabs without rows are left out."""
        self.clear()
        self.tables = {}
        for key, title in SUMMARY_TABS:
            rows = report.summaries.get(key) if report is not None else None
            if rows:
                self._add(key, title, rows, summary_columns(rows))
        job = getattr(report, "job", None)
        if job:
            self._add("ranks", "Ranks", job["ranks"], RANK_COLUMNS)
            self._add("nodes", "Nodes", job["nodes"], NODE_COLUMNS)
        if report is not None and report.processes:
            self._add("processes", "Processes", report.processes, PROCESS_COLUMNS)
        if report is not None and report.coverage is not None and report.coverage.processes:
            self._add("coverage", "Coverage", report.coverage.processes, COVERAGE_COLUMNS)
        if not self.tables:
            self._empty.setText("This report has no summaries (no NVTX, CUDA or OS runtime data).")
            self.addTab(self._empty, "Summary")

    def _add(self, key: str, title: str, rows: list, columns: list[Column]) -> None:
        table = SummaryTable(columns, self)
        table.set_rows(rows, columns)
        table.set_note(records_note(rows))
        self.tables[key] = table
        self.addTab(table, f"{title} ({len(rows)})")
