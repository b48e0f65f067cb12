"""Live plots and console: GPU curves per device, rolling window, a flood of output stays responsive."""

from __future__ import annotations

import time

import numpy as np
import pytest
from apphelpers import fill, make_window, wait_report
from PySide6.QtCore import QTimer

from gpuscope.views.live_model import LiveModel
from gpuscope.app.run.qt_console import QtConsole
from gpuscope.app.run.qt_live_view import QtLiveView
from gpuscope.telemetry.batch import DeviceSample, ProcSample, SampleBatch

pytestmark = pytest.mark.gui


def batch(seq: int, t_s: float, gpus: int = 2) -> SampleBatch:
    """A sampler batch as the NVML backend makes them (values only: no NVML involved)."""
    devices = tuple(DeviceSample(i, f"GPU model {i}", f"GPU-{i}", 10.0 * (i + 1), 5.0, (i + 1) << 30, 80 << 30,
                                 50.0, 100.0, 1500) for i in range(gpus))
    procs = (ProcSample(100, 1, "python", "R", 95.0, 200 << 20, None, 4, 1 << 30, 30.0),
             ProcSample(101, 100, "python", "S", 5.0, 100 << 20, None, 2, None, None))
    t_ns = int(t_s * 1e9)
    return SampleBatch(seq, t_ns, t_ns, None, procs, devices, ())


def test_gpu_curves_per_device_and_process_and_rolling_window(qtbot):
    view = QtLiveView(LiveModel())
    qtbot.addWidget(view)
    for i in range(1200):                      # 120 s at 10 Hz
        view.model.add(batch(i, 1000 + i / 10))
    assert view.refresh() and not view.refresh()   # draws once per model change
    gpu_util = view.plots["gpu_util"].curves
    assert set(gpu_util) == {("gpu", "util_gpu", 0), ("gpu", "util_gpu", 1), ("proc", "sm_util", 100)}
    assert set(view.plots["gpu_mem"].curves) == {("gpu", "mem_used", 0), ("gpu", "mem_used", 1),
                                                 ("proc", "gpu_mem", 100)}
    assert view.gpu_shown and view.gpu_note.isHidden() and not view.plots["gpu_util"].widget.isHidden()
    x, y = gpu_util[("gpu", "util_gpu", 1)].getData()
    assert x[-1] == pytest.approx(119.9) and x[0] <= 119.9 - 60 and x[1] > 119.9 - 60   # last minute
    assert np.all(y == 20.0)
    view.set_whole_run()
    x, y = gpu_util[("gpu", "util_gpu", 1)].getData()
    assert x[0] == 0.0 and x[-1] == pytest.approx(119.9) and np.all(y == 20.0)
    assert len(x) <= 2 * view.plots["gpu_util"].item.getViewBox().width() + 64   # an envelope, not 1,200 points
    y_range = view.plots["gpu_util"].item.getViewBox().viewRange()[1]
    assert y_range == [0.0, 50.0]          # the highest curve (30 %) + 5 %, up to a 1-2-5 step
    view.set_gpu_reason("no NVIDIA GPU / driver (test)")
    assert view.plots["gpu_mem"].widget.isHidden() and "test" in view.gpu_note.text()


def test_console_flood_stays_responsive_bounded_and_searchable(qtbot):
    w = make_window(qtbot)
    w.bottom.setCurrentWidget(w.console)
    fill(w, "flood.py", "100000", "default")
    gaps: list[float] = []
    last = [time.monotonic()]

    def beat() -> None:
        now = time.monotonic()
        gaps.append(now - last[0])
        last[0] = now

    inserted: list[int] = []                  # lines each GUI update put into the console
    real_insert = w.console._insert

    def counting_insert(pieces):
        inserted.append(sum(text.count("\n") for _, text in pieces))
        real_insert(pieces)

    w.console._insert = counting_insert
    heart = QTimer(interval=20)
    heart.timeout.connect(beat)
    heart.start()
    with qtbot.waitSignal(w.controller.sigEnded, timeout=90_000) as blocker:
        w.panel.run_button.click()
    heart.stop()
    assert blocker.args[0].status == "exited"
    w.tick()
    text = w.console.plain_text()
    assert w.console.text.document().blockCount() <= w.console.max_lines + 1
    assert "line 99999 of the flood" in text   # the newest (the first lines may be shown too: test_console.py)
    assert w.console.lines_seen >= 100_000
    # Responsive by construction: no update inserts more than per_tick lines (+1 "skipped" note),
    # however fast the program writes. (How long the GUI thread waited is the machine's business
    # on a shared runner, so it is only reported; bench_live_plot.py measures update times.)
    gaps.sort()
    assert max(inserted) <= w.console.per_tick + 1, (max(inserted), f"longest GUI gaps {gaps[-3:]}")
    assert w.console.lines_skipped > 0 and "lines skipped here (output flood)" in text
    w.console.search.setText("line 99990 of")
    assert w.console.find_next() and w.console.text.textCursor().selectedText() == "line 99990 of"
    w.console.search.setText("no such text")
    assert not w.console.find_next() and w.console.status.text() == "not found"
    wait_report(qtbot, w)
    assert w.last_error is None


def test_console_streams_and_partial_utf8(qtbot):
    from gpuscope.app.run.qt_console import QtConsole

    c = QtConsole(max_lines=5)
    qtbot.addWidget(c)
    euro = "€".encode()
    c.append_chunks([("stdout", b"a\n" + euro[:1]), ("stderr", b"oops\n")])
    c.append_chunks([("stdout", euro[1:] + b"\n")])
    assert c.plain_text().splitlines() == ["a", "oops", "€"]
    c.search.setText("oops")
    assert c.find_next()
    assert c.text.textCursor().charFormat().foreground().color().name() == "#c0392b"   # stderr in red
    c.append_chunks([("stdout", b"".join(b"%d\n" % i for i in range(10)))])
    # shown within the frame's time budget, the rest on the next frames (a loaded machine needs them)
    qtbot.waitUntil(lambda: c.pending_lines() == 0 and c.plain_text().splitlines()[-1] == "9", timeout=5_000)
    assert c.text.document().blockCount() <= 6


def test_nice_top_steps():
    from gpuscope.app.run.qt_live_view import nice_top

    assert [nice_top(v) for v in (0, 0.7, 1.0, 1.01, 3, 7, 31.5, 2e9)] == [1, 1, 1, 2, 5, 10, 50, 2e9]


def test_console_keeps_lines_whole_across_streams_and_notes(qtbot):
    """An unbuffered print writes its arguments one by one; a stderr line or a note of gpuscope's
    arriving in between goes before or after the line, never inside it."""
    console = QtConsole()
    qtbot.addWidget(console)
    console.append_chunks([("stdout", b"results 2 "), ("stderr", b"a warning\n"), ("stdout", b"module m")])
    assert console.plain_text() == "a warning\n"
    console.append_chunks([("stdout", b" args ['a']\n"), ("stdout", b"Enter a number: ")])
    assert console.plain_text() == "a warning\nresults 2 module m args ['a']\n"
    console.append_chunks([])                   # a line without its end waits one tick, no longer
    assert console.plain_text().endswith("\nEnter a number: ")
    console.append_chunks([("stdout", b"4")])
    console.append_text("gpuscope: run ended")  # shows the unfinished line, then the note on its own line
    assert console.plain_text().splitlines()[-2:] == ["Enter a number: 4", "gpuscope: run ended"]
    console.append_chunks([("stdout", "naïve\n".encode()[:3]), ("stdout", "naïve\n".encode()[3:])])
    assert console.plain_text().endswith("\nnaïve\n")   # a character split between chunks too


def _plot_heights(view: QtLiveView) -> dict[str, int]:
    return {name: p.widget.height() for name, p in view.plots.items() if not p.widget.isHidden()}


@pytest.mark.parametrize("size", [(900, 500), (500, 500), (1400, 340)])
def test_no_gpu_is_one_line_and_cpu_rss_get_the_plot_area(qtbot, size):
    """Without a GPU the two GPU plots collapse into one elided line (full text in its tooltip),
    and the CPU and RSS plots share the whole plot area (stacked; side by side when very wide)."""
    view = QtLiveView(LiveModel())
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    for i in range(30):
        view.model.add(batch(i, 1000 + i / 10, gpus=0))
    view.refresh()
    qtbot.waitUntil(lambda: view.plot_area.height() > 0)
    with_gpu = {n: view.plots[n].widget.size() for n in ("cpu", "rss")}
    reason = "no NVIDIA GPU / driver (NVML: NVML Shared Library Not Found) " + "and a long tail " * 10
    view.set_gpu_reason(reason)
    qtbot.waitUntil(lambda: view.plots["gpu_util"].widget.isHidden())
    assert view.plots["gpu_mem"].widget.isHidden()
    note = view.gpu_note
    assert not note.isHidden() and note.toolTip() == f"GPU plots off: {reason}"
    assert note.height() <= 2 * note.fontMetrics().height() + 12          # one line, not half the plots
    assert note.elided().endswith("…") and len(note.elided()) < len(note.text())   # elided, not clipped
    area = view.plot_area.width() * view.plot_area.height()
    qtbot.waitUntil(lambda: sum(view.plots[n].widget.width() * view.plots[n].widget.height()
                                for n in ("cpu", "rss")) > 0.85 * area)
    for n in ("cpu", "rss"):    # each got bigger than its quarter with the GPU plots
        now = view.plots[n].widget.size()
        assert now.width() * now.height() > 1.5 * with_gpu[n].width() * with_gpu[n].height(), (n, now, with_gpu[n])
    cpu, rss = view.plots["cpu"].widget.geometry(), view.plots["rss"].widget.geometry()
    if size[0] >= 3 * size[1]:      # very wide and short: side by side
        assert cpu.top() == rss.top() and rss.left() > cpu.right()
    else:                           # stacked: one time axis under the other
        assert cpu.left() == rss.left() and rss.top() > cpu.bottom()
    view.set_gpu_reason(None)   # a GPU after all (a later run's sampler): the four plots again
    assert not view.plots["gpu_util"].widget.isHidden() and note.isHidden()


def test_legend_names_a_rank_once_with_swatches_beside(qtbot):
    """Legend entries read "PID rank 0", never "rank 0 0"; each swatch sits beside its label."""
    from gpuscope.views.procroles import Identity
    from gpuscope.trace.process_row import display_name

    assert display_name("rank 0", None, 0, "python") == "rank 0"
    assert display_name("pool worker", None, None, "gs:pool1") == "pool worker"
    assert display_name("torchrun worker", None, 1, None) == "torchrun worker (rank 1)"
    assert display_name(None, None, None, "python") == "python"
    view = QtLiveView(LiveModel())
    qtbot.addWidget(view)
    view.resize(1000, 600)
    view.show()
    for i in range(20):
        view.model.add(batch(i, 1000 + i / 10, gpus=0))
    view.model.set_identities({100: Identity("rank 0", 0, None)})
    view.refresh()
    plot = view.plots["cpu"]
    assert "100 rank 0" in plot.legend.texts() and not any("rank 0 0" in t for t in plot.legend.texts())
    qtbot.wait(50)
    legend = plot.legend
    assert legend.geometry().left() >= plot.plot.geometry().right()      # beside the plot, not over it
    for ident, item in legend.entries.items():
        # the swatch is the curve's own pen colour, drawn in the item's icon, left of its text
        swatch = item.icon().pixmap(legend.iconSize()).toImage()
        assert swatch.pixelColor(10, 5).name() == plot.curves[ident].opts["pen"].color().name()
        rect = legend.visualItemRect(item)
        assert rect.height() < 2.5 * legend.fontMetrics().height()       # one compact row, not spread apart
    # more processes than fit: the legend scrolls, the plot keeps its height
    for pid in range(200, 230):
        plot.curve(("proc", "cpu", pid), f"{pid} pool worker")
    qtbot.wait(50)
    assert legend.verticalScrollBar().maximum() > 0 and legend.height() <= plot.widget.height()


def test_axis_titles_carry_units_and_fit(qtbot):
    """Every axis says its unit ("CPU %", "RSS (MiB)", "time (s)"), RSS is drawn in MiB, and at a
    small size the titles still fit in their axis (short plots drop the plot title instead)."""
    view = QtLiveView(LiveModel())
    qtbot.addWidget(view)
    view.resize(420, 300)
    view.show()
    for i in range(30):
        view.model.add(batch(i, 1000 + i / 10, gpus=1))
    view.refresh()
    qtbot.wait(50)
    assert {n: p.axis_labels[0] for n, p in view.plots.items()} == {
        "gpu_util": "GPU util %", "gpu_mem": "GPU mem used (MiB)", "cpu": "CPU %", "rss": "RSS (MiB)"}
    assert view.plots["gpu_mem"].item.getAxis("left").labelText == "GPU MiB"   # short plots: the short title
    assert all(p.item.getAxis("bottom").labelText == "time (s)" for p in view.plots.values())
    _, y = view.plots["rss"].curves[("proc", "rss", 100)].getData()
    assert y[-1] == pytest.approx(200.0)                 # 200 << 20 bytes drawn as 200 MiB
    for p in view.plots.values():
        axis = p.item.getAxis("left")
        text_w = axis.label.boundingRect().width()       # drawn rotated: its width runs along the axis
        assert text_w <= axis.height(), (p.title, text_w, axis.height())
        assert not p.titled                              # 4 plots in 300 px: no room for titles
    view.resize(1000, 900)                               # room again: the long titles and plot titles
    qtbot.waitUntil(lambda: view.plots["gpu_mem"].item.getAxis("left").labelText == "GPU mem used (MiB)")
    assert all(p.titled for p in view.plots.values())


def test_empty_percent_plots_read_0_to_100(qtbot):
    view = QtLiveView(LiveModel())
    qtbot.addWidget(view)
    view.refresh()
    assert view.plots["cpu"].item.getViewBox().viewRange()[1] == [0.0, 100.0]
    assert view.plots["rss"].item.getViewBox().viewRange()[1] == [0.0, 1.0]
