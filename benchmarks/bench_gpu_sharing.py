"""Cost of the GPU-sharing analysis: 1 M kernels of 8 processes (goal < 0.5 s; docs/GPU-SHARING.md).

Two layouts of the same 1,000,000 kernels (2-20 µs each, up to 3 µs apart, every one with a
launch 1-50 µs before it):

* ``sliced``: one GPU; the 8 processes take turns in runs of 16 kernels (time slicing);
* ``spread``: 8 processes over 4 GPUs, each kernel of a random process, overlapping freely.

Measured: ``analyse`` (what ``gpuscope report --json`` computes for ``gpu_sharing``) and ``lanes``
(the report timeline's lane per GPU), from the interval columns (the export is already read).

    python benchmarks/bench_gpu_sharing.py [--rounds 5] [--kernels 1000000]

Each figure is the median over ``--rounds`` rounds, with the spread (min-max) and the median CPU
time of the process (the analysis is single-threaded numpy: CPU time ~ wall time on an idle core).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make(n: int, layout: str, seed: int = 1):
    from gpuscope.gpu.sharing import Work

    rng = np.random.default_rng(seed)
    dur = rng.integers(2_000, 20_000, n)
    start = np.cumsum(dur + rng.integers(0, 3_000, n)) - dur
    if layout == "sliced":
        pid = np.repeat(rng.integers(1000, 1008, n // 16 + 1), 16)[:n]
        device = np.zeros(n, np.int64)
        end = start + dur
    else:
        pid = rng.integers(1000, 1008, n)
        device = pid % 4
        start = start // 3            # denser: work of several processes overlaps
        end = start + dur
    return Work(start.astype(np.int64), end.astype(np.int64), pid.astype(np.int64), device.astype(np.int64),
                (start - rng.integers(1_000, 50_000, n)).astype(np.int64))


def timed(fn, rounds: int) -> tuple[float, float, float, float]:
    """(median wall s, min, max, median CPU s of this process): on a shared, loaded machine the CPU
    time says what the analysis costs, the wall time what a user waited."""
    fn()                              # warm: first-touch page faults of the columns
    wall, cpu = [], []
    for _ in range(rounds):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), min(wall), max(wall), statistics.median(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    args = ap.parse_args()
    from gpuscope.gpu import sharing

    for layout in ("sliced", "spread"):
        work = make(args.kernels, layout)
        for name, fn in (("analyse", partial(sharing.analyse, work)), ("lanes", partial(sharing.lanes, work))):
            med, lo, hi, cpu = timed(fn, args.rounds)
            print(f"{layout:7s} {name:8s} {args.kernels:,} kernels, 8 processes: {med:.3f} s "
                  f"(min {lo:.3f}, max {hi:.3f}; CPU {cpu:.3f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
