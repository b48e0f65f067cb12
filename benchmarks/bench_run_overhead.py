"""What `gpuscope run` adds: a near-empty script (fixed cost) and a 2-worker spawn pool job, against plain python.

    python benchmarks/bench_run_overhead.py [--rounds 8] [--tasks 16] [--size 400000] [--root DIR]

Both sides are whole commands started the same way (subprocess, output discarded), alternated
round by round, so gpuscope's own start-up, telemetry, log reading and store writes count. Reported:
the median of the rounds and the spread (min-max) of each side, the fixed cost (empty script,
gpuscope minus python) split into what comes before the program's first line (launch to first
line, each side's median) and after its last (its exit handler to the command's return), and the
pool job's ratio. ``--root`` runs the gpuscope found in another source tree (e.g. an exported
older commit) to compare before/after in one session.
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
# The "empty" script: it only notes when its first line ran and when its exit handler ran.
MARKS = ("import atexit, sys, time\n"
         "open(sys.argv[1], 'a').write('start %d\\n' % time.time_ns())\n"
         "atexit.register(lambda: open(sys.argv[1], 'a').write('end %d\\n' % time.time_ns()))\n")


def timed(argv: list[str], env: dict[str, str], marks: Path | None = None) -> tuple[float, float, float]:
    """(wall s, launch -> program's first line s, program's exit handler -> command returned s)."""
    if marks is not None:
        marks.unlink(missing_ok=True)
    w0, t0 = time.time_ns(), time.perf_counter()
    subprocess.run(argv, env=env, check=True, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall, w1 = time.perf_counter() - t0, time.time_ns()
    if marks is None:
        return wall, 0.0, 0.0
    seen = dict(line.split() for line in marks.read_text().splitlines())
    return wall, (int(seen["start"]) - w0) / 1e9, (w1 - int(seen["end"])) / 1e9


def alternate(plain: list[str], under: list[str], env: dict[str, str], rounds: int,
              marks: Path | None = None) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    timed(plain, env, marks), timed(under, env, marks)  # warm caches
    a: list[tuple[float, float, float]] = []
    b: list[tuple[float, float, float]] = []
    for i in range(rounds):
        for argv in ((plain, under) if i % 2 == 0 else (under, plain)):
            (a if argv is plain else b).append(timed(argv, env, marks))
    return a, b


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--size", type=int, default=400_000)
    ap.add_argument("--root", help="source tree whose gpuscope to run (default: this checkout)")
    ap.add_argument("--skip-pool", action="store_true", help="only the empty script")
    args = ap.parse_args()
    env = dict(os.environ, GPUSCOPE_HOME=tempfile.mkdtemp(prefix="gs-bench-"))
    if args.root:
        env["PYTHONPATH"] = str(Path(args.root).resolve())
    folder = Path(tempfile.mkdtemp(prefix="gs-bench-"))
    empty, marks = folder / "empty.py", folder / "marks.txt"
    empty.write_text(MARKS)
    gs = [sys.executable, "-m", "gpuscope", "run", "--quiet"]
    print(f"# {os.cpu_count()} CPUs, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}, "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}, {args.rounds} alternated rounds")
    a, b = alternate([sys.executable, str(empty), str(marks)], [*gs, str(empty), str(marks)], env, args.rounds, marks)
    fixed = statistics.median(x[0] for x in b) - statistics.median(x[0] for x in a)
    print(f"empty script: python {spread([x[0] for x in a])}; gpuscope run {spread([x[0] for x in b])}; "
          f"fixed cost {fixed * 1000:.0f} ms (goal <= 50 ms)")
    print(f"  launch -> program's first line: python {ms([x[1] for x in a])}, gpuscope run {ms([x[1] for x in b])}")
    print(f"  program's exit handler -> command returned: python {ms([x[2] for x in a])}, "
          f"gpuscope run {ms([x[2] for x in b])}")
    if not args.skip_pool:
        script = [str(HERE / "pool_workload.py"), str(args.tasks), str(args.size)]
        pa, pb = alternate([sys.executable, *script], [*gs, *script], env, args.rounds)
        ma, mb = statistics.median(x[0] for x in pa), statistics.median(x[0] for x in pb)
        print(f"pool job: python {spread([x[0] for x in pa])}; gpuscope run {spread([x[0] for x in pb])}; "
              f"ratio {mb / ma:.3f}x over {args.rounds} alternated rounds (goal <= 1.05x)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
