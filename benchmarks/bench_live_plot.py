"""Live plot refresh cost with 8 series of one hour at 10 Hz (goal: < 10 ms per refresh).

Fills a :class:`gpuscope.views.live_model.LiveModel` with 36,000 ticks of 8 processes (CPU and
RSS curves: 16 curves over two plots, 8 in each) and then measures, over many refreshes that each
follow one new tick:

* ``refresh``: what the GUI timer does each tick (one ``setData`` per curve), and
* ``refresh + paint``: the same plus rendering the whole view into a pixmap (``grab()``),
  an upper bound of what the screen update costs,

for the rolling one-minute window and for the whole-run view. Offscreen Qt, 1280x800 window.

    .venv/bin/python benchmarks/bench_live_plot.py [--hours 1] [--series 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gpuscope.app  # noqa: F401 - (the PySide6 6.12 refcount guard)
from PySide6.QtWidgets import QApplication

from gpuscope.views.live_model import LiveModel
from gpuscope.app.run.qt_live_view import QtLiveView
from gpuscope.telemetry.batch import ProcSample, SampleBatch


def make_batch(i: int, series: int) -> SampleBatch:
    procs = tuple(ProcSample(1000 + p, 1, "python", "R", float((i * (p + 1)) % 100), (100 + p + i % 50) << 20,
                             None, 4, None, None) for p in range(series))
    t_ns = i * 100_000_000
    return SampleBatch(i, t_ns, t_ns, None, procs, (), ())


def measure(view: QtLiveView, model: LiveModel, start: int, n: int, series: int, paint: bool) -> list[float]:
    times = []
    for k in range(n):
        model.add(make_batch(start + k, series))
        t0 = time.perf_counter()
        view.refresh()
        if paint:
            view.grab()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def fmt(times: list[float]) -> str:
    times = sorted(times)
    return f"median {statistics.median(times):6.2f} ms, p95 {times[int(0.95 * len(times))]:6.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--series", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=40)
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    model = LiveModel()
    view = QtLiveView(model)
    view.set_gpu_reason("benchmark: no GPU plots")
    view.resize(1280, 800)
    view.show()
    ticks = int(args.hours * 3600 * 10)
    t0 = time.perf_counter()
    for i in range(ticks):
        model.add(make_batch(i, args.series))
    add_us = (time.perf_counter() - t0) / ticks * 1e6
    app.processEvents()
    print(f"{args.series} processes x {ticks:,} ticks ({args.hours:g} h at 10 Hz); model.add {add_us:.0f} us per tick")
    n = ticks
    for label, index in (("rolling 1 min", 1), ("whole run", 3)):
        view.window.setCurrentIndex(index)  # type: ignore[attr-defined]  # the view's window combo shadows QWidget.window
        app.processEvents()
        r = measure(view, model, n, args.repeats, args.series, paint=False)
        n += args.repeats
        p = measure(view, model, n, args.repeats, args.series, paint=True)
        n += args.repeats
        print(f"  {label:14s} refresh: {fmt(r)} | refresh + paint: {fmt(p)}")
    view.close()


if __name__ == "__main__":
    main()
