"""GUI-thread stalls while a run floods the console (issue 16.1: goal, the longest stall < 50 ms).

The real main window (offscreen Qt, 1280x800, the Console tab in view) runs programs through the
real run path (Run button → RunController → supervisor → output pumps → bridge → console), while
a 10 ms timer on the GUI thread records how late each of its beats comes: a beat due at t that
comes at t + x means the GUI thread was busy (or waiting) for x. Three programs, alternated round
by round:

* ``quiet``: sleeps 2 s (the baseline: what a run costs the GUI thread without output),
* ``stdout``: prints 1 M lines with ``print`` (a pseudo-terminal: line-buffered, 4 KB reads),
* ``stderr``: logs 1 M lines to stderr one ``print`` at a time (a pipe, as ``logging`` does).

Per round, over the run (from the window hearing it started to it hearing it ended): the longest
stall, the 95th percentile and the median lateness; and "click to report": the longest stall from
the Run click to 0.3 s after the run's report is shown (the run's start and end on the GUI thread
included). Printed: the median of the rounds and their spread (min–max), per program, and the load
average before and after.

    .venv/bin/python benchmarks/bench_gui_stall.py [--rounds 5] [--lines 1000000] [--console-off] [--screenshot OUT.png]

``--console-off``: the console drops what it is given (the floor: what the run, the output
threads and the rest of the window cost the GUI thread without the console's work).
``--screenshot``: the window, grabbed 1.5 s into one more ``stdout`` run (docs/screenshots/console-flood.png).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_TMP = Path(tempfile.mkdtemp(prefix="gs-stall-"))
os.environ["GPUSCOPE_HOME"] = str(_TMP / "home")
os.environ["GPUSCOPE_APP_SETTINGS"] = str(_TMP / "settings.ini")

import gpuscope.app  # noqa: E402,F401 - (the PySide6 6.12 refcount guard)
from PySide6.QtCore import QCoreApplication, QEventLoop, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

PROGRAMS = {
    "quiet": "import time\ntime.sleep(2.0)\n",
    "stdout": "import sys\nfor i in range(int(sys.argv[1])):\n"
              "    print(f'line {i} of the flood, some text to make it a realistic length')\n",
    "stderr": "import sys\nfor i in range(int(sys.argv[1])):\n"
              "    print(f'log {i} of the flood: a warning line as logging writes them', file=sys.stderr)\n",
}


def one_run(app: QCoreApplication, w, kind: str, lines: int, screenshot: str | None = None) -> dict[str, float]:
    script = _TMP / f"{kind}.py"
    script.write_text(PROGRAMS[kind])
    w.panel.set_script(str(script))
    w.panel.args.setText(str(lines))
    w.panel.method.setCurrentIndex(w.panel.method.findData("default"))
    beats: list[tuple[float, float]] = []
    last = [time.perf_counter()]

    def beat() -> None:
        now = time.perf_counter()
        beats.append((now, now - last[0] - 0.010))
        last[0] = now

    timer = QTimer(interval=10)
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.timeout.connect(beat)
    marks: dict[str, float] = {}
    loop = QEventLoop()
    on_start = lambda run: marks.setdefault("started", time.perf_counter())  # noqa: E731
    def on_end(result: Any) -> None:
        marks.setdefault("ended", time.perf_counter())
        marks.setdefault("duration", (result.ended_ns - result.started_ns) / 1e9)
        loop.quit()

    w.controller.sigStarted.connect(on_start)
    w.controller.sigEnded.connect(on_end)
    timer.start()
    if screenshot:
        QTimer.singleShot(1500, lambda: w.grab().save(screenshot))
    marks["click"] = time.perf_counter()
    w.panel.run_button.click()
    loop.exec()
    w.controller.sigStarted.disconnect(on_start)
    w.controller.sigEnded.disconnect(on_end)
    # the run's end on the GUI thread: the window finishes the run's report (loaded on a worker,
    # shown on the GUI thread) before the next round; the beats go on meanwhile
    deadline = time.monotonic() + 60
    while (w._report_pending is not None or w.status.tasks) and time.monotonic() < deadline:
        wait = QEventLoop()
        QTimer.singleShot(50, wait.quit)
        wait.exec()
    marks["shown"] = time.perf_counter()
    wait = QEventLoop()                     # and what follows it (the report's layout, paints)
    QTimer.singleShot(300, wait.quit)
    wait.exec()
    timer.stop()
    late = sorted(x for t, x in beats if marks["started"] < t - x - 0.010 and t <= marks["ended"])
    # from the Run click to 0.3 s after the report is shown: the run's start and end included
    around = max(x for t, x in beats if t > marks["click"])
    return {"max": late[-1] * 1e3, "p95": late[int(0.95 * len(late))] * 1e3,
            "median": statistics.median(late) * 1e3, "around": around * 1e3, "run_s": marks["duration"],
            "shown": w.console.lines_seen - w.console.lines_skipped}


def spread(values: list[float], unit: str = "ms") -> str:
    return f"{statistics.median(values):7.1f} {unit} ({min(values):.1f}–{max(values):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--screenshot", metavar="OUT.png")
    ap.add_argument("--console-off", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()
    app = QApplication.instance() or QApplication([])
    from gpuscope.app.qt_main_window import MainWindow

    w = MainWindow()
    w.show_dialogs = False
    w.resize(1280, 800)
    w.show()
    w.bottom.setCurrentWidget(w.console)
    if args.console_off:
        w.console.append_chunks = lambda chunks, dropped=None: None  # type: ignore[method-assign]  # console off
    one_run(app, w, "quiet", args.lines)        # warm-up (imports, the first report)
    results: dict[str, list[dict[str, float]]] = {k: [] for k in PROGRAMS}
    for r in range(args.rounds):
        for kind in PROGRAMS:
            results[kind].append(one_run(app, w, kind, args.lines))
            x = results[kind][-1]
            print(f"round {r + 1} {kind:6s}: longest stall {x['max']:6.1f} ms, p95 {x['p95']:5.1f} ms, "
                  f"median {x['median']:4.1f} ms; click to report {x['around']:6.1f} ms; run {x['run_s']:.2f} s",
                  file=sys.stderr)
    if args.screenshot:
        one_run(app, w, "stdout", args.lines, screenshot=args.screenshot)
    w.close()
    load_after = os.getloadavg()
    print(f"GUI-thread lateness of a 10 ms timer during the run, {args.lines:,} lines, median of "
          f"{args.rounds} alternated rounds (min–max); {os.cpu_count()} CPUs")
    print(f"{'program':8s} {'longest stall':>24s} {'p95':>24s} {'median':>22s} {'click to report':>24s} "
          f"{'run':>20s}")
    for kind, rows in results.items():
        print(f"{kind:8s} {spread([x['max'] for x in rows]):>24s} {spread([x['p95'] for x in rows]):>24s} "
              f"{spread([x['median'] for x in rows]):>22s} {spread([x['around'] for x in rows]):>24s} "
              f"{spread([x['run_s'] for x in rows], 's'):>20s}")
    print("load average before: %.2f %.2f %.2f; after: %.2f %.2f %.2f" % (*load_before, *load_after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
