"""Benchmark: how long a cleanup listing takes, and its parts (not a test; run by hand).

    .venv/bin/python -m tests.cleanup.bench_scan [EXTRA_SLEEPERS] [TORCH_PROCS]

Starts EXTRA_SLEEPERS `sleep` processes and TORCH_PROCS Python processes that import torch
(thousands of memory-map lines each), under the test subreaper, then times ProcTable.take,
the /dev/shm usage scan, one Scanner.scan(), and `gpuscope cleanup --json --idle-window 0`.
Everything it started is killed and reaped at the end.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from tests.cleanup.conftest import Reaper


def _timed(fn, n: int = 5) -> float:
    runs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    extra = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    torch_procs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    from gpuscope.cleanup import Scanner
    from gpuscope.cleanup.snapshot import ProcTable
    from gpuscope.cleanup.shm import scan_usage

    reaper = Reaper()
    try:
        for _ in range(extra):
            reaper("spawn", argv=["sleep", "600"], setsid=False)
        code = "import torch, time; print('ok', flush=True); time.sleep(600)"
        for _ in range(torch_procs):
            reaper("spawn", argv=[sys.executable, "-c", code], setsid=True)
        time.sleep(8 if torch_procs else 1)   # let torch finish importing
        n = len(ProcTable.take().procs)
        maps = sum(1 for d in os.listdir("/proc") if d.isdigit()
                   for _ in _lines(f"/proc/{d}/maps"))
        t_take = _timed(ProcTable.take)
        t_shm = _timed(lambda: scan_usage({os.stat("/dev/shm").st_dev}))
        t_scan = _timed(lambda: Scanner(use_gpu=False).scan())
        env = dict(os.environ, GPUSCOPE_HOME=tempfile.mkdtemp())
        cmd = [sys.executable, "-m", "gpuscope", "cleanup", "--json", "--idle-window", "0"]
        t_cli = _timed(lambda: subprocess.run(cmd, env=env, capture_output=True, check=True), 3)
        print(f"processes: {n}, memory-map lines: {maps}")
        print(f"ProcTable.take: {t_take * 1000:.0f} ms; shm usage scan: {t_shm * 1000:.0f} ms; "
              f"Scanner.scan: {t_scan * 1000:.0f} ms; CLI listing (incl. 0.3 s CPU window and "
              f"interpreter start): {t_cli * 1000:.0f} ms (medians)")
    finally:
        reaper.close()


def _lines(path: str):
    try:
        with open(path) as fh:
            yield from fh
    except OSError:
        return


if __name__ == "__main__":
    main()
