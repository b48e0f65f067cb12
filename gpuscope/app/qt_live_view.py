"""Live plots: GPU utilization and memory (per device and per process), CPU % and RSS per process.

The refresh timer of the main window calls :meth:`QtLiveView.refresh` about ten times a second.
A refresh makes one ``setData`` per curve, and only when the model changed.
Long series are reduced to a min/max envelope of about two points per pixel before ``setData``
(:func:`gpuscope.app.plot_buffers.envelope`, the same idea as pyqtgraph's ``peak`` downsampling but
done once per refresh instead of once per paint), the y range is set from the data drawn, and
pens are one pixel wide (wider pens make Qt's raster engine several times slower), so a one-hour
10 Hz run redraws about as fast as a short one. Rolling window (30 s, 1 min, 5 min) or the
whole run. A tool's own processes (Nsight Systems') are one grey dashed total curve; "show
Nsight Systems processes" draws each of them too.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QSizePolicy, QStackedWidget, QVBoxLayout,
                               QWidget)

import numpy as np

from gpuscope.app.live_model import LiveModel
from gpuscope.app.plot_buffers import envelope
from gpuscope.app.qt_findings import FindingsStrip
from gpuscope.app.qt_notes_banner import NotesBanner
from gpuscope.telemetry import metrics

WINDOWS = (("last 30 s", 30.0), ("last 1 min", 60.0), ("last 5 min", 300.0), ("whole run", None))
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
TITLES = {"gpu_util": ("gpu", "util_gpu", "GPU utilization"), "gpu_mem": ("gpu", "mem_used", "GPU memory"),
          "cpu": ("proc", "cpu", "CPU per process"), "rss": ("proc", "rss", "RSS per process")}
GPU_PLOTS = ("gpu_util", "gpu_mem")
TOOL_PEN = "#9a9a9a"
RAY_PEN = "#202020"
MIN_SPAN_S = 5.0


def nice_top(value: float) -> float:
    """The next 1, 2 or 5 x 10^k at or above ``value`` (a y-axis top that rarely changes)."""
    if not value > 0:
        return 1.0
    power = 10.0 ** np.floor(np.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10.0 * power


def format_elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:d}:{s % 60:02d}"


class _Plot:
    """One plot and its curves, keyed by (kind, key, subject)."""

    def __init__(self, name: str) -> None:
        kind, key, title = TITLES[name]
        m = metrics.get(kind, key)
        self.widget = pg.PlotWidget(title=title)
        self.widget.setBackground("w")
        item = self.widget.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.3)
        item.setLabel("left", m.label, units=m.unit if m.unit != "%" else None)
        item.setLabel("bottom", "time since start", units="s")
        if m.unit == "%":
            item.setLabel("left", f"{m.label} (%)")
        item.setMouseEnabled(x=False, y=False)
        item.hideButtons()
        item.disableAutoRange()
        # the legend sits right of the plot (column 3 of the PlotItem's grid), never over the data
        self.legend = pg.LegendItem(labelTextSize="8pt", verSpacing=-6)
        item.layout.addItem(self.legend, 2, 3)
        self.legend.setVisible(False)        # an empty legend draws as a stray little box
        self.item = item
        self.curves: dict[tuple[str, str, int], pg.PlotDataItem] = {}
        self.labels: dict[tuple[str, str, int], str] = {}
        self.top = 0.0

    def set_top(self, data_max: float) -> None:
        """Move the y-axis top only to a new 1-2-5 step, and down only when the data fell below
        a third of it: the axis (whose text is most of a repaint's cost) is redrawn rarely."""
        top = nice_top(data_max * 1.05)
        if top > self.top or top < self.top / 3:
            self.top = top
            self.item.setYRange(0.0, top, padding=0.0)

    def curve(self, ident: tuple[str, str, int], label: str) -> pg.PlotDataItem:
        c = self.curves.get(ident)
        if c is not None and self.labels[ident] != label:   # a role became known: rename
            self.labels[ident] = label
            legend_label = self.legend.getLabel(c)
            if legend_label is not None:
                legend_label.setText(label)
        if c is None:
            self.labels[ident] = label
            color = PALETTE[len(self.curves) % len(PALETTE)]
            # devices solid; processes dashed past the tenth (the palette repeats); a tool's total grey
            dashed = ident[0] == "group" or (ident[0] != "gpu" and len(self.curves) >= len(PALETTE))
            style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
            pen = pg.mkPen(TOOL_PEN if ident[0] == "group" else color, width=1, style=style)
            if ident[0] == "ray":   # the Ray object store: one thick dark curve, spilled bytes dotted
                pen = pg.mkPen(RAY_PEN, width=3, style=Qt.PenStyle.DotLine if ident[1] != "used"
                               else Qt.PenStyle.SolidLine)
            c = self.item.plot(pen=pen)
            self.legend.addItem(c, label)
            self.curves[ident] = c
            self.legend.setVisible(True)
        return c

    def drop(self, ident: tuple[str, str, int]) -> None:
        """Take one curve off the plot (a tool's process when its processes are hidden again)."""
        c = self.curves.pop(ident)
        self.labels.pop(ident, None)
        self.item.removeItem(c)
        self.legend.removeItem(c)
        self.legend.setVisible(bool(self.curves))

    def clear(self) -> None:
        for c in self.curves.values():
            self.item.removeItem(c)
        self.legend.clear()
        self.legend.setVisible(False)
        self.curves.clear()
        self.labels.clear()
        self.top = 0.0


class QtLiveView(QWidget):
    """Four plots over a :class:`LiveModel`, with a window choice and the elapsed time."""

    def __init__(self, model: LiveModel | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model or LiveModel()
        self._drawn_version = -1
        self.window_s: float | None = 60.0
        self.elapsed = QLabel("elapsed 0:00")
        self.elapsed.setStyleSheet("font-size: 14pt; font-weight: bold;")
        self.title = QLabel("")
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.window = QComboBox()
        for text, seconds in WINDOWS:
            self.window.addItem(text, seconds)
        self.window.setCurrentIndex(1)
        self.window.currentIndexChanged.connect(self._window_changed)
        self.show_tools = QCheckBox("show Nsight Systems processes")
        self.show_tools.setToolTip("nsys's own processes are drawn as one grey total; check to draw each")
        self.show_tools.setVisible(False)
        self.show_tools.toggled.connect(self._window_changed)
        bar = QHBoxLayout()
        bar.addWidget(self.elapsed)
        bar.addWidget(self.title, 1)
        bar.addWidget(self.show_tools)
        bar.addWidget(QLabel("show"))
        bar.addWidget(self.window)
        self.plots = {name: _Plot(name) for name in TITLES}
        self.no_gpu: dict[str, QLabel] = {}
        self.stacks: dict[str, QStackedWidget] = {}
        grid = QHBoxLayout()
        left, right = QVBoxLayout(), QVBoxLayout()
        for name in TITLES:
            stack = QStackedWidget()
            stack.addWidget(self.plots[name].widget)
            if name in GPU_PLOTS:
                label = QLabel(alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
                label.setStyleSheet("background: white; color: #666; font-size: 12pt; border: 1px solid #ccc;")
                stack.addWidget(label)
                self.no_gpu[name] = label
            self.stacks[name] = stack
            (left if name in GPU_PLOTS else right).addWidget(stack)
        grid.addLayout(left)
        grid.addLayout(right)
        self.notes = NotesBanner(self)     # --annotate results, after the run
        self.findings = FindingsStrip(self)   # the run's findings, live
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.findings)
        lay.addWidget(self.notes)
        lay.addLayout(grid, 1)

    # -- state ----------------------------------------------------------------------------------
    def reset(self, title: str = "") -> None:
        """Empty plots for a new run; the GPU notice stays until the run's sampler says otherwise."""
        reason = self.model.gpu_reason
        self.model.reset()
        for p in self.plots.values():
            p.clear()
        self.title.setText(title)
        self.notes.clear()
        self.findings.clear()
        self.set_gpu_reason(reason)
        self._drawn_version = -1
        self.refresh()

    def set_gpu_reason(self, reason: str | None) -> None:
        """With a reason (no GPU), the GPU plots say so instead of sitting empty."""
        self.model.gpu_reason = reason
        for name, label in self.no_gpu.items():
            label.setText(f"{TITLES[name][2]}: not available\n{reason}" if reason else "")
            self.stacks[name].setCurrentIndex(1 if reason else 0)

    def set_elapsed(self, seconds: float, state: str = "") -> None:
        self.elapsed.setText(f"{state + ' ' if state else ''}{format_elapsed(seconds)}")

    def _window_changed(self) -> None:
        self.window_s = self.window.currentData()
        self._drawn_version = -1
        self.refresh()

    def set_whole_run(self) -> None:
        self.window.setCurrentIndex(len(WINDOWS) - 1)

    # -- drawing --------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Redraw if the model changed; True if it drew."""
        if self.model.version == self._drawn_version:
            return False
        self._drawn_version = self.model.version
        last = self.model.last_t
        x_min = None if self.window_s is None else max(0.0, last - self.window_s)
        # rolling: the data fills the width until the window is full; whole run: exactly the run
        x_max = max(last, MIN_SPAN_S if self.window_s is not None else 0.5)
        self.show_tools.setVisible(bool(self.model.groups))
        for name, plot in self.plots.items():
            width = max(100, int(plot.item.getViewBox().width()))
            top = 0.0
            drawn = set()
            for kind, key, subject, buf in self.model.curves(name, tools=self.show_tools.isChecked()):
                label = self._label(kind, key, subject)
                x, y = envelope(*buf.window(x_min), 2 * width)
                plot.curve((kind, key, subject), label).setData(x, y)
                drawn.add((kind, key, subject))
                if len(y):
                    top = max(top, float(np.fmax.reduce(y)) if not np.isnan(y).all() else 0.0)
            for ident in [i for i in plot.curves if i not in drawn]:
                plot.drop(ident)
            plot.item.setXRange(x_min or 0.0, x_max, padding=0.01)
            plot.set_top(top)
        if self.model.gpu_reason and not self.no_gpu["gpu_util"].text():
            self.set_gpu_reason(self.model.gpu_reason)
        return True

    def _label(self, kind: str, key: str, subject: int) -> str:
        if kind == "gpu":
            return self.model.devices.get(subject, f"GPU {subject}")
        if kind == "ray":
            return "Ray object store" if key == "used" else "Ray spilled to disk (total)"
        if kind == "group":
            group = self.model.groups[subject] if subject < len(self.model.groups) else "tools"
            return f"{group} (total)"
        row = self.model.procs.get(subject)
        who = f"{subject}"
        if row is not None:
            who += f" {row.display}"
        return who + (" SM" if key == "sm_util" else "")
