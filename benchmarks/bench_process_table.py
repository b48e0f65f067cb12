"""What the Processes table costs the GUI thread per tick while a run runs (offscreen Qt).

Each tick the window adds the sampler's batch to the model and calls ``QtProcessTree.refresh``;
the table re-sorts only when a value of the sorted column moved (docs/APP.md, "Processes
table"). Measured per refresh (plus the events it posts), for a tree of N processes (a root, each
process with up to four children) whose CPU % and RSS change every tick, in alternated rounds:

* ``by PID``: the default order (values move, the order does not: no re-sort);
* ``by CPU %``: sorted by a column whose values move every tick (a re-sort every tick);
* ``baseline``: one ``QLabel.setText`` of a new text, for scale on this machine.

    .venv/bin/python benchmarks/bench_process_table.py [--rounds 5] [--ticks 40] [--n 50 300]

Prints the median per refresh over the rounds, with the spread (min–max of the rounds' medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gpuscope.app  # noqa: F401 - (the PySide6 6.12 refcount guard)
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QApplication, QLabel

from gpuscope.views.live_model import LiveModel
from gpuscope.app.run.qt_process_tree import COL, QtProcessTree
from gpuscope.telemetry.batch import ProcSample, SampleBatch


def batch(n: int, k: int) -> SampleBatch:
    procs = tuple(ProcSample(100 + i, 100 + (i - 1) // 4 if i else 1, "python", "S", float((i * 7 + k) % 50),
                             (10 + (i + k) % 9) << 20, None, 1, None, None) for i in range(n))
    return SampleBatch(k, k * 100_000_000, k, None, procs, (), ())


def per_refresh_ms(app: QCoreApplication, n: int, column: int, ticks: int) -> float:
    model = LiveModel()
    tree = QtProcessTree(model)
    tree.resize(900, 600)
    tree.show()
    tree.sortByColumn(column, Qt.SortOrder.DescendingOrder if column != COL["PID"] else Qt.SortOrder.AscendingOrder)
    model.add(batch(n, 0))
    tree.refresh()
    app.processEvents()
    times = []
    for k in range(1, ticks + 1):
        model.add(batch(n, k))
        t = time.perf_counter()
        tree.refresh()
        app.processEvents()
        times.append(time.perf_counter() - t)
    tree.close()
    tree.deleteLater()
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ticks", type=int, default=40)
    ap.add_argument("--n", type=int, nargs="+", default=[50, 300])
    a = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    label = QLabel()

    def baseline() -> float:
        t = time.perf_counter()
        for k in range(a.ticks):
            label.setText(f"text {k}")
        return (time.perf_counter() - t) / a.ticks * 1e3

    def case(n: int, col: int) -> Callable[[], float]:
        return lambda: per_refresh_ms(app, n, col, a.ticks)

    cases = {f"{n} processes, by {name}": case(n, col)
             for n in a.n for name, col in (("PID", COL["PID"]), ("CPU %", COL["CPU %"]))}
    cases["baseline (QLabel.setText)"] = baseline
    results: dict[str, list[float]] = {c: [] for c in cases}
    for _ in range(a.rounds):                       # alternated: every case once per round
        for name, fn in cases.items():
            results[name].append(fn())
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    for name, values in results.items():
        print(f"{name:28s} median {statistics.median(values):8.3f} ms per refresh "
              f"(rounds {min(values):.3f}–{max(values):.3f})")


if __name__ == "__main__":
    main()
