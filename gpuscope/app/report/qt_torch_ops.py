"""QtTorchOps: the report's "Torch ops" tab, for a run with PyTorch profiler traces.

A rank selector (one rank, or all ranks summed) over three sortable tables: the operators
(``key_averages``, as torch prints it), the operators across ranks (median, min, max, the slowest
rank) and the steps per rank with the straggler. A click on a row highlights that row's events
on the timeline and shows the longest (:attr:`QtTorchOps.sigHighlight`, as the NVTX summary does).
The rows are :mod:`gpuscope.views.torch_ops`'s; nothing is computed here.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from PySide6.QtCore import QModelIndex, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QTabWidget, QVBoxLayout, QWidget

from gpuscope.app import workers
from gpuscope.app.report.qt_summary import Column, SummaryTable
from gpuscope.app.widgets.qt_elided_label import ElidedLabel
from gpuscope.torchtrace import ranks as R
from gpuscope.torchtrace.ops import OpRow, step_name
from gpuscope.views import torch_ops as V

MAX_RANK_COLUMNS = 16      # the across-ranks and steps tables name each rank up to this many


def torch_time(us: float) -> str:
    """A time as torch's key_averages table prints it (``12.345us``, ``1.234ms``, ``2.000s``)."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def torch_memory(nbytes: int) -> str:
    """Bytes as torch prints them (``4.00 Kb``, ``-1.50 Mb``)."""
    for div, unit in ((1 << 30, "Gb"), (1 << 20, "Mb"), (1 << 10, "Kb")):
        if abs(nbytes) >= div:
            return f"{nbytes / div:.2f} {unit}"
    return f"{nbytes} b"


def _pct(v: float) -> str:
    return f"{v:.2f}%"


def op_columns(rows: list[OpRow]) -> list[Column]:
    """torch's key_averages columns for these rows: CUDA and memory columns only when recorded,
    input shapes when the rows are grouped by them."""
    self_cpu = float(sum(r.self_cpu_us for r in rows)) or 1.0
    self_cuda = float(sum(r.self_cuda_us for r in rows)) or 1.0
    cols = [Column("Name", lambda r: r.name, numeric=False)]
    if any(r.shapes for r in rows):
        cols.append(Column("Input Shapes", lambda r: r.shapes, numeric=False))
    cols += [Column("Self CPU %", lambda r: 100 * float(r.self_cpu_us) / self_cpu, _pct),
             Column("Self CPU", lambda r: float(r.self_cpu_us), torch_time),
             Column("CPU total %", lambda r: 100 * float(r.cpu_total_us) / self_cpu, _pct),
             Column("CPU total", lambda r: float(r.cpu_total_us), torch_time),
             Column("CPU time avg", lambda r: float(r.cpu_total_us) / max(r.count, 1), torch_time)]
    if any(r.self_cuda_us or r.cuda_total_us for r in rows):
        cols += [Column("Self CUDA", lambda r: float(r.self_cuda_us), torch_time),
                 Column("Self CUDA %", lambda r: 100 * float(r.self_cuda_us) / self_cuda, _pct),
                 Column("CUDA total", lambda r: float(r.cuda_total_us), torch_time),
                 Column("CUDA time avg", lambda r: float(r.cuda_total_us) / max(r.count, 1), torch_time)]
    if any(r.cpu_mem or r.self_cpu_mem for r in rows):
        cols += [Column("CPU Mem", lambda r: int(r.cpu_mem), torch_memory),
                 Column("Self CPU Mem", lambda r: int(r.self_cpu_mem), torch_memory)]
    if any(r.cuda_mem or r.self_cuda_mem for r in rows):
        cols += [Column("CUDA Mem", lambda r: int(r.cuda_mem), torch_memory),
                 Column("Self CUDA Mem", lambda r: int(r.self_cuda_mem), torch_memory)]
    cols.append(Column("# of Calls", lambda r: int(r.count), str))
    return cols


def _rank_value(rank: int) -> Callable[[Any], Any]:
    return lambda r: None if rank not in r.by_rank else float(r.by_rank[rank])


def across_columns(ranks: list[int]) -> list[Column]:
    """Per operator over ranks (the report's sort metric)."""
    cols = [Column("Name", lambda r: r.name, numeric=False),
            Column("Median", lambda r: float(V.cross_summary(r)[0]), torch_time),
            Column("Min", lambda r: float(V.cross_summary(r)[1]), torch_time),
            Column("Max", lambda r: float(V.cross_summary(r)[2]), torch_time),
            Column("Max − min", lambda r: float(V.cross_summary(r)[2] - V.cross_summary(r)[1]), torch_time),
            Column("Slowest rank", lambda r: r.slowest_rank, str),
            Column("Ranks", lambda r: len(r.by_rank), str)]
    return cols + [Column(f"Rank {k}", _rank_value(k), torch_time) for k in ranks[:MAX_RANK_COLUMNS]]


def _ms(v: float) -> str:
    return f"{v:,.3f}"


def step_columns(ranks: list[int]) -> list[Column]:
    cols = [Column("Step", lambda s: s.step, str), Column("Slowest rank", lambda s: s.slowest_rank, str),
            Column("Median work (ms)", lambda s: float(s.median_work_ms), _ms),
            Column("Spread (ms)", lambda s: float(s.spread_ms), _ms)]
    for k in ranks[:MAX_RANK_COLUMNS]:
        cols += [Column(f"Rank {k} (ms)", _step_value("by_rank_ms", k), _ms),
                 Column(f"Rank {k} waits (ms)", _step_value("wait_by_rank_ms", k), _ms)]
    return cols


def _step_value(attr: str, rank: int) -> Callable[[Any], Any]:
    return lambda s: None if rank not in getattr(s, attr) else float(getattr(s, attr)[rank])


class QtTorchOps(QWidget):
    """The Torch ops tab. ``sigHighlight(table, index)``: a row's events on the timeline (a
    Timeline table and its rows, an int64 array)."""

    sigHighlight = Signal(str, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.torch: V.TorchReport | None = None
        self.rank_box = QComboBox(self)
        self.rank_box.currentIndexChanged.connect(self._rank_changed)
        self.shapes_box = QCheckBox("Group by input shapes", self)   # traces with shapes only
        self.shapes_box.toggled.connect(self._shapes_toggled)
        self.shapes_task: workers.Task | None = None
        self.straggler = QLabel(self)
        self.straggler.setStyleSheet("color: #8a3b00;")
        self.notes = ElidedLabel(self)      # unreadable or missing traces, one line (all in the tooltip)
        self.notes.setStyleSheet("color: #b00020;")
        self.ops = SummaryTable([], self)
        self.across = SummaryTable([], self)
        self.steps = SummaryTable([], self)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.ops, "Operators")
        self.tabs.addTab(self.across, "Across ranks")
        self.tabs.addTab(self.steps, "Steps")
        for table, chosen in ((self.ops, self._op_chosen), (self.across, self._across_chosen),
                              (self.steps, self._step_chosen)):
            table.view.clicked.connect(lambda index, t=table, f=chosen: f(self._row(t, index)))
            table.view.activated.connect(lambda index, t=table, f=chosen: f(self._row(t, index)))
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(QLabel("Rank:", self))
        top.addWidget(self.rank_box)
        top.addWidget(self.shapes_box)
        top.addWidget(self.straggler, 1)
        top.addWidget(self.notes, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.tabs, 1)

    @property
    def rank(self) -> int | None:
        """The rank the Operators table shows (None: all ranks summed)."""
        data = self.rank_box.currentData()
        return None if data is None or data < 0 else int(data)

    def show_torch(self, torch: V.TorchReport) -> None:
        self.torch = torch
        ranks = torch.ranks
        self.rank_box.blockSignals(True)
        self.rank_box.clear()
        if len(ranks) > 1:
            self.rank_box.addItem(f"All {len(ranks)} ranks", -1)
        for x in torch.ops.ranks:
            self.rank_box.addItem(f"rank {x.rank} (pid {x.trace.pid})", x.rank)
            self.rank_box.setItemData(self.rank_box.count() - 1, V.clock_text(x.trace), 3)  # 3: ToolTipRole
        self.rank_box.setCurrentIndex(0)
        self.rank_box.blockSignals(False)
        self.straggler.setText(V.straggler_text(torch))
        self.notes.set_full_text("; ".join(torch.notes))
        self.notes.setVisible(bool(torch.notes))
        self.across.set_rows(torch.ops.across, across_columns(ranks))
        self.across.set_note(f"by {torch.ops.sort.replace('_', ' ')}, largest spread first")
        self.steps.set_rows(V.step_lines(torch), step_columns(ranks))
        self.shapes_box.blockSignals(True)
        self.shapes_box.setChecked(False)
        self.shapes_box.blockSignals(False)
        self.shapes_box.setVisible(V.has_shapes(torch))
        self.tabs.setTabVisible(1, len(ranks) > 1)
        self.tabs.setTabVisible(2, bool(torch.ops.steps))
        self._rank_changed()

    def select_rank(self, rank: int | None) -> None:
        """Show one rank's operators (None: all ranks)."""
        pos = self.rank_box.findData(-1 if rank is None else rank)
        if pos >= 0:
            self.rank_box.setCurrentIndex(pos)

    @property
    def by_shapes(self) -> bool:
        """The Operators table is grouped by input shapes (and those rows are computed)."""
        return self.shapes_box.isChecked() and self.torch is not None and self.torch.by_shapes is not None

    def _rank_changed(self, _pos: int = 0) -> None:
        if self.torch is None:
            return
        rows = V.op_rows(self.torch, self.rank, self.by_shapes)
        self.ops.set_rows(rows, op_columns(rows))

    def _shapes_toggled(self, on: bool) -> None:
        """Grouped by shapes: key_averages again per rank, on a worker (big traces take seconds)."""
        torch = self.torch
        if not on or torch is None or torch.by_shapes is not None:
            self._rank_changed()
            return
        self.shapes_box.setEnabled(False)

        def done(_result: Any) -> None:
            self.shapes_task = None
            self.shapes_box.setEnabled(True)
            if torch is self.torch:
                self._rank_changed()

        def failed(text: str) -> None:
            done(None)
            self.notes.set_full_text(text)
            self.notes.show()

        self.shapes_task = workers.submit(lambda task: V.group_by_shapes(torch), on_done=done, on_error=failed,
                                          label="grouping by input shapes")

    def show_event(self, d: dict[str, Any]) -> None:
        """An event chosen on the timeline (its details dict): its operator's row, on its rank when
        one rank is shown, and for a ``ProfilerStep#N`` its step's row, made current."""
        if self.torch is None or d.get("source") != "torch":
            return
        rank = next((x.rank for x in self.torch.ops.ranks if x.trace.pid == d.get("pid")), None)
        if self.rank is not None and rank is not None and rank != self.rank:
            self.select_rank(rank)
        name = step_name(str(d.get("name")))
        device = d.get("kind") == "kernel"
        rows = self.ops.model.rows
        hit = next((i for i, r in enumerate(rows) if r.name == name and r.device == device), None)
        if hit is not None:
            _make_current(self.ops, hit)
        if name == "ProfilerStep*":
            number = str(d.get("name"))[len(R.STEP_PREFIX):]
            steps = self.steps.model.rows
            at = next((i for i, s in enumerate(steps) if str(s.step) == number), None)
            if at is not None:
                _make_current(self.steps, at)

    @staticmethod
    def _row(table: SummaryTable, index: QModelIndex) -> Any:
        return table.model.rows[table.proxy.mapToSource(index).row()]

    def _emit(self, found: tuple[str, np.ndarray]) -> None:
        self.sigHighlight.emit(*found)

    def _op_chosen(self, row: OpRow) -> None:
        if self.torch is not None:
            self._emit(V.events_of(self.torch, row.name, self.rank, row.device, shapes=row.shapes))

    def _across_chosen(self, row: Any) -> None:
        if self.torch is not None:
            found = V.events_of(self.torch, row.name)
            self._emit(found if len(found[1]) else V.events_of(self.torch, row.name, device=True))

    def _step_chosen(self, row: V.StepLine) -> None:
        if self.torch is not None:
            self._emit(V.events_of(self.torch, "", step=row.step))


def _make_current(table: SummaryTable, source_row: int) -> None:
    """Select a model row (as the user sees it through the sort and filter) without choosing it."""
    index = table.proxy.mapFromSource(table.model.index(source_row, 0))
    if index.isValid():
        table.view.setCurrentIndex(index)
        table.view.scrollTo(index)
