"""Time from `gpuscope gui` starting to its first shown window (goal: < 1.5 s).

Runs ``python -m gpuscope gui --quit-after-show`` (offscreen Qt, a temporary settings file and
data directory) several times and measures, from the parent, the wall time until the child
prints that the window is shown (a zero-delay timer after ``show()``: the first event-loop
turn, after the first paint has been queued). Prints min / median / max.

    .venv/bin/python benchmarks/bench_app_start.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def once(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "gui", "--quit-after-show"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    for line in proc.stdout:
        if b"window shown" in line:
            elapsed = time.perf_counter() - t0
            break
    else:
        raise SystemExit(f"the app did not report a shown window (exit {proc.wait()})")
    proc.wait(timeout=30)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", GPUSCOPE_HOME=tmp,
                   GPUSCOPE_APP_SETTINGS=os.path.join(tmp, "settings.ini"))
        once(env)   # warm the OS file cache, as a second launch of a desktop app would be
        times = [once(env) for _ in range(args.runs)]
    print(f"start to first shown window over {args.runs} runs: min {min(times):.3f} s, "
          f"median {statistics.median(times):.3f} s, max {max(times):.3f} s (goal < 1.5 s)")


if __name__ == "__main__":
    main()
