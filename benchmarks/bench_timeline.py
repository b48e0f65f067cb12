"""Timeline view repaint cost with a million NVTX ranges (offscreen Qt).

    .venv/bin/python benchmarks/bench_timeline.py [--ranges 1000000] [--size 1600x900] [--repeat 3]

Builds a synthetic Timeline through the real classes (tests/app/timeline_support.synthetic_timeline:
8 thread lanes, three nesting levels, depths from ``compute_depths``), lays it out
(``timeline_lod.build_layout``), then drives QtTimeline through a fixed sequence of views — fit,
zoom in step by step around the centre down to single ranges, pan left/right at several zoom
levels, zoom back out — and times each frame with ``grab()`` (the widget's full paintEvent into a
pixmap). Prints the median and p95 frame time, both for the paintEvent alone and for the whole
step (view change + grab), and the layout build time.

``--overlays`` alternates each plain pass with a pass that has a summary row's highlight (every
"step" range, a fifth of them) and a measured span (the middle third of the run) on screen, and
prints both medians and their ratio (same run, same machine load).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def p95(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def steps(w) -> list:
    """The view changes of one pass: (label, callable)."""
    out = [("fit", w.fit)]
    for i in range(14):
        out.append((f"zoom in {i + 1}", lambda: w.zoom(1.8)))
        if i % 3 == 2:
            for _ in range(3):
                out.append(("pan right", lambda: w.pan_px(-200)))
            out.append(("pan left", lambda: w.pan_px(300)))
    out += [("pan down", lambda: w.pan_px(0, -150)), ("pan up", lambda: w.pan_px(0, 150))]
    for i in range(14):
        out.append((f"zoom out {i + 1}", lambda: w.zoom(1 / 1.8)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranges", type=int, default=1_000_000)
    ap.add_argument("--size", default="1600x900")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--overlays", action="store_true", help="alternate passes with a highlight and a measure")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))

    from PySide6.QtWidgets import QApplication

    from gpuscope.views import timeline_lod as L
    from gpuscope.app.timeline.qt_timeline import QtTimeline
    from tests.app.timeline_support import synthetic_timeline

    app = QApplication.instance() or QApplication([])
    t = time.perf_counter()
    tl = synthetic_timeline(args.ranges)
    made = time.perf_counter() - t
    t = time.perf_counter()
    layout = L.build_layout(tl)
    built = time.perf_counter() - t
    w = QtTimeline()
    w.resize(width, height)
    w.show()
    app.processEvents()
    w.set_layout(layout)
    w.grab()   # warm caches (fonts, colours)
    paint, step_ms, rects = [], [], []
    over_paint: list[float] = []
    passes = [False, True] * args.repeat if args.overlays else [False] * args.repeat
    for overlay in passes:
        if overlay:
            w.highlight_name("nvtx", "step", jump=False)
            w.measure_span(layout.t_min + (layout.t_max - layout.t_min) / 3,
                           layout.t_min + 2 * (layout.t_max - layout.t_min) / 3, emit=False)
        else:
            w.clear_highlight()
            w.clear_measure()
        for _label, change in steps(w):
            if overlay:
                change()
                w.grab()
                over_paint.append(w.last_paint_ms)
                continue
            w.painter.rects_drawn = 0
            t = time.perf_counter()
            change()
            w.grab()
            step_ms.append((time.perf_counter() - t) * 1000)
            paint.append(w.last_paint_ms)
            rects.append(w.painter.rects_drawn)
    levels = max(len(r.levels) for p in layout.processes for ln in p.lanes for r in ln.rows)
    print(f"ranges: {len(tl.ranges):,} in {sum(len(p.lanes) for p in layout.processes)} lanes, "
          f"{sum(len(ln.rows) for p in layout.processes for ln in p.lanes)} rows; widget {width}x{height}")
    print(f"synthetic timeline: {made:.2f} s; layout (lanes + LOD pyramids, up to {levels} levels): {built:.2f} s")
    print(f"frames: {len(paint)} ({args.repeat} passes of fit / zoom in x14 / pans / zoom out x14)")
    print(f"paintEvent ms: median {statistics.median(paint):.1f}, p95 {p95(paint):.1f}, max {max(paint):.1f}")
    print(f"step (view change + grab) ms: median {statistics.median(step_ms):.1f}, p95 {p95(step_ms):.1f}")
    print(f"rectangles per frame: median {int(statistics.median(rects))}, max {max(rects)}")
    if over_paint:
        ratio = statistics.median(over_paint) / statistics.median(paint)
        print(f"with highlight + measure, paintEvent ms: median {statistics.median(over_paint):.1f}, "
              f"p95 {p95(over_paint):.1f}, max {max(over_paint):.1f} (x{ratio:.2f} of the plain passes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
