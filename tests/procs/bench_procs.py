"""Figures of the process service (docs/PROCS.md): ``python -m tests.procs.bench_procs [N]``.

Medians of N (default 21) calls each on this machine as it is; prints one line per figure and
the load average before and after. Not a test: no thresholds.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

from gpuscope.procs import membership, namespace, read, shm


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1e3, 2)


def main(n: int = 21) -> None:
    print("load", os.getloadavg())
    procs = read.snapshot()
    scope = membership.RunScope.of(os.getpid(), "bench")
    nvml = [(pid, 1 << 20) for pid in list(procs)[:8]]
    devs = {s.dev for s in shm.list_segments()}
    print("processes", len(procs))
    print("snapshot_ms", median_ms(read.snapshot, n))
    print("run_members_ms", median_ms(lambda: membership.run_members(scope), n))
    print("map_gpu_pids_8_ms", median_ms(lambda: namespace.map_gpu_pids(nvml, host=False, procs=procs,
                                                                       holds_gpu=lambda p: False), n))
    print("shm_scan_usage_ms", median_ms(lambda: shm.scan_usage(devs), n))
    print("load", os.getloadavg())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
