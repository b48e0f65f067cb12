"""What the findings strip costs the GUI thread while a run runs (offscreen Qt).

The window reads the findings recorder's merged list twice a second and hands it to the strip
(``FindingsStrip.set_findings``). Measured, with 20 findings on the strip, in alternated rounds:

* ``unchanged``: the same list again (the usual case: nothing new);
* ``other row``: one finding that is not selected changed (a count grew);
* ``selected row``: the selected finding changed (its details are drawn again);
* ``baseline``: one ``QLabel.setText`` of a new text, for scale on this machine.

    .venv/bin/python benchmarks/bench_findings_strip.py [--rounds 5] [--n 200]

Prints the median per update over the rounds, with the spread (min–max of the rounds' medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gpuscope.app  # noqa: F401 - (the PySide6 6.12 refcount guard)
from PySide6.QtWidgets import QApplication, QLabel

from gpuscope.app.widgets.qt_findings import FindingsStrip
from gpuscope.finding import Finding, SetStartMethod, Severity, evidence


def findings(n: int = 20) -> list[Finding]:
    return [Finding(f"code-{i}", f"title {i} " * 8, "fix " * 20, Severity.ERROR if i == 0 else Severity.WARNING,
                    (1000 + i,), evidence({"failed starts": i}, ["a line of output"] * 10, [1000 + i]),
                    SetStartMethod("spawn"), i) for i in range(n)]


def median_us(fn, n: int) -> float:
    times = []
    for k in range(n):
        t = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=200, help="updates per case and round")
    a = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    strip = FindingsStrip()
    strip.resize(860, 200)
    strip.show()
    label = QLabel()
    base = findings()
    strip.set_findings(base)
    app.processEvents()

    def grown(row: int):
        return lambda k: strip.set_findings(base[:row] + [replace(base[row], evidence=evidence({"failed starts": k}))]
                                            + base[row + 1:])

    cases = {"unchanged": lambda k: strip.set_findings(list(base)),
             "other row": grown(len(base) - 1),
             "selected row": grown(0),
             "baseline (QLabel.setText)": lambda k: label.setText(f"text {k}")}
    results: dict[str, list[float]] = {c: [] for c in cases}
    for _ in range(a.rounds):                       # alternated: every case once per round
        for name, fn in cases.items():
            strip.set_findings(base)
            results[name].append(median_us(fn, a.n))
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    for name, values in results.items():
        print(f"{name:28s} median {statistics.median(values):9.1f} µs per update "
              f"(rounds {min(values):.1f}–{max(values):.1f})")


if __name__ == "__main__":
    main()
