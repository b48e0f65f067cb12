"""Live plots: GPU utilization and memory (per device and per process), CPU % and RSS per process.

The refresh timer of the main window redraws the plots about ten times a second, one plot per turn
of the event loop (:meth:`QtLiveView.refresh_plot`; :meth:`QtLiveView.refresh` draws them all).
A refresh makes one ``setData`` per curve, and only when the model changed.
Long series are reduced to a min/max envelope of about two points per pixel before ``setData``
(:func:`gpuscope.views.plot_buffers.envelope`, the same idea as pyqtgraph's ``peak`` downsampling but
done once per refresh instead of once per paint), the y range is set from the data drawn, and
pens are one pixel wide (wider pens make Qt's raster engine several times slower), so a one-hour
10 Hz run redraws about as fast as a short one. Rolling window (30 s, 1 min, 5 min) or the
whole run. A tool's own processes (Nsight Systems') are one grey dashed total curve; "show
Nsight Systems processes" draws each of them too.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtGui import QFontMetrics, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFrame, QGridLayout, QHBoxLayout, QLabel, QListWidget,
                               QListWidgetItem, QSizePolicy, QVBoxLayout, QWidget)

import numpy as np

from gpuscope.views.live_model import LiveModel
from gpuscope.views.plot_buffers import envelope
from gpuscope.app.widgets.qt_findings import FindingsStrip
from gpuscope.app.widgets.qt_notes_banner import NotesBanner
from gpuscope.telemetry import metrics

WINDOWS = (("last 30 s", 30.0), ("last 1 min", 60.0), ("last 5 min", 300.0), ("whole run", None))
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
TITLES = {"gpu_util": ("gpu", "util_gpu", "GPU utilization"), "gpu_mem": ("gpu", "mem_used", "GPU memory"),
          "cpu": ("proc", "cpu", "CPU per process"), "rss": ("proc", "rss", "RSS per process")}
GPU_PLOTS = ("gpu_util", "gpu_mem")
MIB = float(1 << 20)
TIME_LABEL = "time (s)"
AXIS_STYLE = {"font-size": "8pt"}
LEFT_AXIS_W = 54        # px: title + ticks up to "80000" (MiB of a large GPU)
TITLE_MIN_H = 170        # px: a shorter plot drops its title (the axis label says what it is)
SIDE_BY_SIDE_MIN_W = 760  # px: without a GPU, CPU and RSS side by side from this width of the plot area
SIDE_BY_SIDE_RATIO = 3.0  # ... and only when it is this much wider than tall (else stacked: one time axis)
LEGEND_W = 160           # px: the legend beside each plot (entries elide, full text in the tooltip)
TOOL_PEN = "#9a9a9a"
RAY_PEN = "#202020"
MIN_SPAN_S = 5.0


def axis_label(m: "metrics.Metric") -> str:
    """The y-axis title with its unit: "CPU %", "RSS (MiB)" (bytes are drawn in MiB)."""
    if m.unit == "%":
        return f"{m.label} %"
    if m.unit == "B":
        return f"{m.label} (MiB)"
    return f"{m.label} ({m.unit})" if m.unit else m.label


def short_axis_label(m: "metrics.Metric") -> str:
    """The y-axis title of a short plot: the unit and the metric's first word ("GPU MiB")."""
    unit = "MiB" if m.unit == "B" else m.unit
    return f"{m.label.split()[0]} {unit}".strip()


class ElidedLabel(QLabel):
    """One line; text too long for the width ends in "…", the whole text is the tooltip."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text)

    def elided(self) -> str:
        room = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, max(room, 0))

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), self.elided())



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


class Legend(QListWidget):
    """The curves of one plot: a swatch of the curve's pen beside each label, one per row, scrolling
    when there are more than fit. A plain list beside the plot, so it never takes the plot's height."""

    def __init__(self) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setIconSize(QSize(20, 10))
        self.setUniformItemSizes(True)
        self.setStyleSheet("QListWidget { background: white; color: #333; font-size: 8pt; }")
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Ignored)
        self.setFixedWidth(LEGEND_W)
        self.entries: dict[tuple[str, str, int], QListWidgetItem] = {}

    @staticmethod
    def swatch(pen: QPen) -> QIcon:
        pix = QPixmap(20, 10)
        pix.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pix)
        line = QPen(pen)
        line.setWidthF(max(2.0, pen.widthF()))
        painter.setPen(line)
        painter.drawLine(0, 5, 20, 5)
        painter.end()
        return QIcon(pix)

    def add(self, ident: tuple[str, str, int], label: str, pen: QPen) -> None:
        item = QListWidgetItem(self.swatch(pen), label)
        item.setToolTip(label)
        self.addItem(item)
        self.entries[ident] = item

    def rename(self, ident: tuple[str, str, int], label: str) -> None:
        item = self.entries[ident]
        item.setText(label)
        item.setToolTip(label)

    def remove(self, ident: tuple[str, str, int]) -> None:
        item = self.entries.pop(ident)
        self.takeItem(self.row(item))

    def clear(self) -> None:
        super().clear()
        self.entries.clear()

    def texts(self) -> list[str]:
        return [self.item(i).text() for i in range(self.count())]


class _Plot:
    """One plot and its curves, keyed by (kind, key, subject)."""

    def __init__(self, name: str) -> None:
        kind, key, title = TITLES[name]
        m = metrics.get(kind, key)
        self.title = title
        self.scale = MIB if m.unit == "B" else 1.0     # bytes are drawn in MiB, no SI prefixes
        self.empty_top = 100.0 if m.unit == "%" else 1.0   # before any data: 0–100 %, not 0–1
        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.setMinimumSize(120, 60)
        # the legend is a list beside the plot (never over the data, never taller than the plot)
        self.legend = Legend()
        self.legend.setVisible(False)
        self.widget = QWidget()       # the plot and its legend: what the view lays out
        self.widget.setAutoFillBackground(True)
        palette = self.widget.palette()
        palette.setColor(self.widget.backgroundRole(), Qt.GlobalColor.white)
        self.widget.setPalette(palette)
        row = QHBoxLayout(self.widget)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.plot, 1)
        row.addWidget(self.legend)
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.3)
        self.axis_labels = (axis_label(m), short_axis_label(m))
        item.setLabel("left", self.axis_labels[0], **AXIS_STYLE)
        item.setLabel("bottom", TIME_LABEL, **AXIS_STYLE)
        for side in ("left", "bottom"):
            item.getAxis(side).enableAutoSIPrefix(False)
            # grid lines at the labelled ticks only: pyqtgraph's default also draws two levels of
            # faint minor lines, which made a plot's repaint several times slower (all plots
            # repaint on every refresh, docs/APP.md "Never freeze" has the figures)
            item.getAxis(side).setStyle(maxTickLevel=0)
        item.getAxis("left").setWidth(LEFT_AXIS_W)     # the same in every plot: their time axes line up
        self.item = item
        self.titled = True
        item.getViewBox().sigResized.connect(self._fit_axis_label)
        self.show_title(True)
        item.setMouseEnabled(x=False, y=False)
        item.hideButtons()
        item.disableAutoRange()
        self.curves: dict[tuple[str, str, int], pg.PlotDataItem] = {}
        self.labels: dict[tuple[str, str, int], str] = {}
        self.top = 0.0

    def show_title(self, shown: bool) -> None:
        """A title above the plot, or none (a short plot: its axis label says what it is)."""
        self.item.setTitle(self.title if shown else None, size="9pt")
        self.titled = shown

    def _fit_axis_label(self, *_: object) -> None:
        """The long y title when the axis is tall enough for it, else the short one (never cut)."""
        axis = self.item.getAxis("left")
        long_text, short_text = self.axis_labels
        room = self.item.getViewBox().height()
        font = axis.label.font()
        text = long_text if QFontMetrics(font).horizontalAdvance(long_text) + 8 <= room else short_text
        if axis.labelText != text:
            axis.setLabel(text, **AXIS_STYLE)

    def set_top(self, data_max: float) -> None:
        """Move the y-axis top only to a new 1-2-5 step, and down only when the data fell below
        a third of it: the axis (whose text is most of a repaint's cost) is redrawn rarely."""
        top = nice_top(data_max * 1.05) if data_max > 0 else self.empty_top
        if top > self.top or top < self.top / 3:
            self.top = top
            self.item.setYRange(0.0, top, padding=0.0)

    def curve(self, ident: tuple[str, str, int], label: str) -> pg.PlotDataItem:
        c = self.curves.get(ident)
        if c is not None and self.labels[ident] != label:   # a role became known: rename
            self.labels[ident] = label
            self.legend.rename(ident, label)
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
            self.legend.add(ident, label, pen)
            self.curves[ident] = c
            self.legend.setVisible(True)
        return c

    def drop(self, ident: tuple[str, str, int]) -> None:
        """Take one curve off the plot (a tool's process when its processes are hidden again)."""
        c = self.curves.pop(ident)
        self.labels.pop(ident, None)
        self.item.removeItem(c)
        self.legend.remove(ident)
        self.legend.setVisible(bool(self.curves))

    def clear(self, keep_legend: bool = False) -> None:
        """No curves. ``keep_legend``: the (empty) legend keeps its room, so that the plot does not
        change size now and again at the next curve (each a relayout and full repaint)."""
        for c in self.curves.values():
            self.item.removeItem(c)
        self.legend.clear()
        self.legend.setVisible(keep_legend and self.legend.isVisibleTo(self.widget))
        self.curves.clear()
        self.labels.clear()
        self.top = 0.0


class QtLiveView(QWidget):
    """Four plots over a :class:`LiveModel`, with a window choice and the elapsed time."""

    def __init__(self, model: LiveModel | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model or LiveModel()
        self._plot_versions: dict[str, int] = {}   # plot name: the model version it shows
        self.window_s: float | None = 60.0
        self.elapsed = QLabel("elapsed 0:00")
        self.elapsed.setStyleSheet("font-size: 14pt; font-weight: bold;")
        self.title = ElidedLabel("")          # script · launcher · method · run id · pid, "…" when narrow
        self.span_choice = QComboBox()
        for text, seconds in WINDOWS:
            self.span_choice.addItem(text, seconds)
        self.span_choice.setCurrentIndex(1)
        self.span_choice.currentIndexChanged.connect(self._window_changed)
        self.show_tools = QCheckBox("show Nsight Systems processes")
        self.show_tools.setToolTip("nsys's own processes are drawn as one grey total; check to draw each")
        self.show_tools.setVisible(False)
        self.show_tools.toggled.connect(self._window_changed)
        bar = QHBoxLayout()
        bar.addWidget(self.elapsed)
        bar.addWidget(self.title, 1)
        bar.addWidget(self.show_tools)
        bar.addWidget(QLabel("show"))
        bar.addWidget(self.span_choice)
        self.plots = {name: _Plot(name) for name in TITLES}
        # no GPU: one line instead of the two GPU plots, which then leave CPU and RSS the room
        self.gpu_note = ElidedLabel()
        self.gpu_note.setStyleSheet("color: #555; background: #f4f4f4; border: 1px solid #ccc; padding: 2px 6px;")
        self.gpu_note.hide()
        self.plot_area = QWidget()
        self.grid = QGridLayout(self.plot_area)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(4)
        self.plot_area.installEventFilter(self)
        self._arrangement: tuple = ()
        self._arrange()
        self.notes = NotesBanner(self)     # --annotate results, after the run
        self.findings = FindingsStrip(self)   # the run's findings, live
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.findings)
        lay.addWidget(self.notes)
        lay.addWidget(self.gpu_note)
        lay.addWidget(self.plot_area, 1)

    # -- state ----------------------------------------------------------------------------------
    def reset(self, title: str = "", keep_legends: bool = False) -> None:
        """Empty plots for a new run; the GPU notice stays until the run's sampler says otherwise.
        ``keep_legends``: a run starts, its processes will fill them: the legends shown keep their
        room meanwhile (the plots keep their size as the run starts)."""
        reason = self.model.gpu_reason
        self.model.reset()
        for p in self.plots.values():
            p.clear(keep_legend=keep_legends)
        self.title.setText(title)
        self.notes.clear()
        self.findings.clear()
        self.set_gpu_reason(reason)
        self._plot_versions.clear()
        self.refresh()

    def set_gpu_reason(self, reason: str | None) -> None:
        """With a reason (no GPU), one line says so and the GPU plots give their room to the others."""
        self.model.gpu_reason = reason
        self.gpu_note.setText(f"GPU plots off: {reason}" if reason else "")
        self.gpu_note.setVisible(bool(reason))
        self._arrange()

    @property
    def gpu_shown(self) -> bool:
        return not self.model.gpu_reason

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.plot_area and event.type() == QEvent.Type.Resize:
            self._arrange()
        return False

    def _arrange(self) -> None:
        """Place the plots for the room there is: 2×2 with a GPU; without one, CPU above RSS (their
        time axes aligned), side by side only in a very wide, short area. Short plots drop their titles."""
        size = self.plot_area.size()
        gpu = self.gpu_shown
        wide = not gpu and size.width() >= SIDE_BY_SIDE_MIN_W and size.width() >= SIDE_BY_SIDE_RATIO * size.height()
        rows = 2 if gpu or not wide else 1
        titled = size.height() / rows >= TITLE_MIN_H
        arrangement = (gpu, wide, titled)
        if arrangement == self._arrangement:
            return
        self._arrangement = arrangement
        for p in self.plots.values():
            self.grid.removeWidget(p.widget)
        if gpu:
            places = {"gpu_util": (0, 0), "cpu": (0, 1), "gpu_mem": (1, 0), "rss": (1, 1)}
        else:
            places = {"cpu": (0, 0), "rss": (0, 1) if wide else (1, 0)}
        for name, p in self.plots.items():
            where = places.get(name)
            p.widget.setVisible(where is not None)
            if where is not None:
                self.grid.addWidget(p.widget, *where)
            if p.titled != titled:
                p.show_title(titled)
        for i in range(2):
            self.grid.setRowStretch(i, 1 if i < rows else 0)
            self.grid.setColumnStretch(i, 1 if (gpu or wide or i == 0) else 0)

    def set_elapsed(self, seconds: float, state: str = "") -> None:
        self.elapsed.setText(f"{state + ' ' if state else ''}{format_elapsed(seconds)}")

    def _window_changed(self) -> None:
        self.window_s = self.span_choice.currentData()
        self._plot_versions.clear()
        self.refresh()

    def set_whole_run(self) -> None:
        self.span_choice.setCurrentIndex(len(WINDOWS) - 1)

    # -- drawing --------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Redraw every plot whose data changed; True if it drew."""
        drew = False
        for name in self.plots:
            drew = self.refresh_plot(name) or drew
        return drew

    def stale_plots(self) -> list[str]:
        """The plots a refresh would redraw (the model changed since they were drawn)."""
        version = self.model.version
        return [name for name in self.plots if self._plot_versions.get(name) != version]

    def refresh_plot(self, name: str) -> bool:
        """Redraw one plot if the model changed since it was drawn; True if it drew.

        The window's timer redraws the plots one at a time, each in its own turn of the event loop
        (``MainWindow.tick``): a plot's repaint is most of a refresh's GUI-thread time, and Qt
        paints everything made dirty in one turn at once."""
        version = self.model.version
        if self._plot_versions.get(name) == version:
            return False
        self._plot_versions[name] = version
        plot = self.plots[name]
        last = self.model.last_t
        x_min = None if self.window_s is None else max(0.0, last - self.window_s)
        # rolling: the data fills the width until the window is full; whole run: exactly the run
        x_max = max(last, MIN_SPAN_S if self.window_s is not None else 0.5)
        self.show_tools.setVisible(bool(self.model.groups))
        width = max(100, int(plot.item.getViewBox().width()))
        top = 0.0
        drawn = set()
        for kind, key, subject, buf in self.model.curves(name, tools=self.show_tools.isChecked()):
            label = self._label(kind, key, subject)
            x, y = envelope(*buf.window(x_min), 2 * width)
            if plot.scale != 1.0:
                y = y / plot.scale
            plot.curve((kind, key, subject), label).setData(x, y)
            drawn.add((kind, key, subject))
            if len(y):
                top = max(top, float(np.fmax.reduce(y)) if not np.isnan(y).all() else 0.0)
        for ident in [i for i in plot.curves if i not in drawn]:
            plot.drop(ident)
        plot.item.setXRange(x_min or 0.0, x_max, padding=0.01)
        plot.set_top(top)
        if self.model.gpu_reason and not self.gpu_note.text():
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
        who = f"{subject} {row.display}" if row is not None else str(subject)
        return who + (" SM" if key == "sm_util" else "")
