"""Wall time of a 2-worker spawn pool script under `gpuscope run` vs plain `python`, A/B alternated.

    python benchmarks/bench_run_overhead.py [--rounds 8] [--tasks 16] [--size 400000]

Both sides are whole commands started the same way (subprocess, output captured), so gpuscope's
own start-up, telemetry, log reading and store writes count. Goal (issue #2): <= 1.05x.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--size", type=int, default=400_000)
    args = ap.parse_args()
    env = dict(os.environ, GPUSCOPE_HOME=tempfile.mkdtemp(prefix="gs-bench-"))
    script = [str(HERE / "pool_workload.py"), str(args.tasks), str(args.size)]
    plain = [sys.executable, *script]
    under = [sys.executable, "-m", "gpuscope", "run", "--quiet", *script]
    timed(plain, env), timed(under, env)  # warm caches
    a, b = [], []
    for i in range(args.rounds):
        order = (plain, under) if i % 2 == 0 else (under, plain)
        for argv in order:
            (a if argv is plain else b).append(timed(argv, env))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"plain python: median {ma:.3f} s (min {min(a):.3f}); gpuscope run: median {mb:.3f} s "
          f"(min {min(b):.3f}); ratio {mb / ma:.3f}x over {args.rounds} alternated rounds (goal <= 1.05x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
