"""What `gpuscope run` adds: an empty script (fixed cost) and a 2-worker spawn pool job, against plain python.

    python benchmarks/bench_run_overhead.py [--rounds 8] [--tasks 16] [--size 400000] [--root DIR]

Both sides are whole commands started the same way (subprocess, output discarded), alternated
round by round, so gpuscope's own start-up, telemetry, log reading and store writes count. Reported:
the median of the rounds and the spread (min-max) of each side, the fixed cost (empty script,
gpuscope minus python) and the pool job's ratio. ``--root`` runs the gpuscope found in another
source tree (e.g. an exported older commit) to compare before/after in one session.
Goals (issue 14.4): <= 50 ms fixed, <= 1.05x on a ~1 s pool job.
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
    subprocess.run(argv, env=env, check=True, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def alternate(plain: list[str], under: list[str], env: dict[str, str], rounds: int) -> tuple[list[float], list[float]]:
    timed(plain, env), timed(under, env)  # warm caches
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        for argv in ((plain, under) if i % 2 == 0 else (under, plain)):
            (a if argv is plain else b).append(timed(argv, env))
    return a, b


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--size", type=int, default=400_000)
    ap.add_argument("--root", help="source tree whose gpuscope to run (default: this checkout)")
    args = ap.parse_args()
    env = dict(os.environ, GPUSCOPE_HOME=tempfile.mkdtemp(prefix="gs-bench-"))
    if args.root:
        env["PYTHONPATH"] = str(Path(args.root).resolve())
    empty = Path(tempfile.mkdtemp(prefix="gs-bench-")) / "empty.py"
    empty.write_text("")
    gs = [sys.executable, "-m", "gpuscope", "run", "--quiet"]
    a, b = alternate([sys.executable, str(empty)], [*gs, str(empty)], env, args.rounds)
    fixed = statistics.median(b) - statistics.median(a)
    print(f"empty script: python {spread(a)}; gpuscope run {spread(b)}; fixed cost {fixed * 1000:.0f} ms "
          f"(goal <= 50 ms)")
    script = [str(HERE / "pool_workload.py"), str(args.tasks), str(args.size)]
    a, b = alternate([sys.executable, *script], [*gs, *script], env, args.rounds)
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"pool job: python {spread(a)}; gpuscope run {spread(b)}; ratio {mb / ma:.3f}x "
          f"over {args.rounds} alternated rounds (goal <= 1.05x)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
