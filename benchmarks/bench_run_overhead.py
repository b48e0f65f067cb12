"""What `gpuscope run` adds: a near-empty script (fixed cost), a 0.2 s program and a 2-worker spawn
pool job, against plain python.

    python benchmarks/bench_run_overhead.py [--rounds 8] [--tasks 16] [--size 400000] [--short 0.2]
                                            [--root DIR] [--compare OLD]

Every side is a whole command started the same way (subprocess, output discarded; gpuscope through
the `gpuscope` command pip installs for that tree: its packaging/bin/gpuscope, or for an older tree
without one the launcher pip writes for a [project.scripts] entry point; gpuscope finds its data
folder from XDG_DATA_HOME as for a user, a fresh one for each side), alternated
round by round (the order rotates), so gpuscope's own start-up, telemetry, log reading and store
writes count. Reported: the median of the rounds and the spread (min-max) of each side, the fixed
cost (empty script, gpuscope minus python) split into what comes before the program's first line
(launch to first line, each side's median) and after its last (its exit handler to the command's
return), the CPU of each whole command tree (steadier than wall time on a shared machine); the
same for the script sleeping ``--short`` seconds (a short program that outlasts gpuscope's own
start-up, which then overlaps with it: the fixed cost a program of a fraction of a second pays);
and the pool job's ratio: of the medians, and the median (min-max) of each round's own
ratio (the sides of a round ran one after the other, under the same load), with the same two
phases of the pool job (its main process notes them: ``pool_workload.py``'s third argument) and
their sum beyond plain python's per round, as a share of the plain job: the steady part of the
ratio, which on a shared machine moves much less than the ratio itself.

``--root DIR`` runs the gpuscope found in another source tree instead of this checkout;
``--compare OLD`` adds a third side, the gpuscope of the source tree OLD (e.g. ``git archive main
| tar -x -C /tmp/old``), in the same alternated rounds, so before and after meet the same load.

Byte code: both trees are compiled ahead (``compileall``), as ``pip install`` does for a user;
otherwise PYTHONDONTWRITEBYTECODE (set on the development machines) makes every start of a
checkout compile gpuscope's modules again (~0.05 s). ``--no-compile`` measures that case.
Goals (docs/BENCHMARKS.md): <= 100 ms fixed, <= 1.05x on a ~1 s pool job.
"""
from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The "empty" script: it only notes when its first line ran and when its exit handler ran (and
# sleeps for its second argument's seconds, when given: the short program).
MARKS = ("import atexit, sys, time\n"
         "open(sys.argv[1], 'a').write('start %d\\n' % time.time_ns())\n"
         "atexit.register(lambda: open(sys.argv[1], 'a').write('end %d\\n' % time.time_ns()))\n"
         "if len(sys.argv) > 2:\n"
         "    time.sleep(float(sys.argv[2]))\n")

# What pip writes as bin/gpuscope for `[project.scripts] gpuscope = "gpuscope.cli:main"` (less its
# shebang): the command of trees before packaging/bin/gpuscope.
PIP_CONSOLE_SCRIPT = """# -*- coding: utf-8 -*-
import re
import sys
from gpuscope.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""

Timing = tuple[float, float, float, float]


def _command(tree: Path, folder: Path) -> Path:
    """The tree's `gpuscope` command as pip installs it (its first line is replaced by pip and
    read by nobody here: the command runs as `python COMMAND`)."""
    own = tree / "packaging" / "bin" / "gpuscope"
    if own.is_file():
        return own
    command = folder / f"gpuscope-{abs(hash(str(tree)))}"
    command.write_text(PIP_CONSOLE_SCRIPT)
    return command


def timed(argv: list[str], env: dict[str, str], marks: Path | None = None) -> Timing:
    """(wall s, launch -> program's first line s, program's exit handler -> command returned s,
    CPU s of the whole command tree: user + system of every process it reaped)."""
    if marks is not None:
        marks.unlink(missing_ok=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0, t0 = time.time_ns(), time.perf_counter()
    subprocess.run(argv, env=env, check=True, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall, w1 = time.perf_counter() - t0, time.time_ns()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if marks is None:
        return wall, 0.0, 0.0, cpu
    seen = dict(line.split() for line in marks.read_text().splitlines())
    return wall, (int(seen["start"]) - w0) / 1e9, (w1 - int(seen["end"])) / 1e9, cpu


def alternate(sides: dict[str, tuple[list[str], dict[str, str]]], rounds: int,
              marks: Path | None = None) -> dict[str, list[Timing]]:
    """Each side once per round, the order rotated round by round; one warm-up run each first."""
    for argv, env in sides.values():
        timed(argv, env, marks)
    names = list(sides)
    out: dict[str, list[Timing]] = {name: [] for name in names}
    for i in range(rounds):
        k = i % len(names)
        order = names[k:] + names[:k]
        if (i // len(names)) % 2:
            order.reverse()
        for name in order:
            argv, env = sides[name]
            out[name].append(timed(argv, env, marks))
    return out


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def ms_signed(values: list[float]) -> str:
    return (f"{statistics.median(values) * 1000:+.0f} ms "
            f"({min(values) * 1000:+.0f} to {max(values) * 1000:+.0f})")


def median(rows: list[Timing], i: int) -> float:
    return statistics.median(r[i] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--size", type=int, default=400_000)
    ap.add_argument("--root", help="source tree whose gpuscope to run (default: this checkout)")
    ap.add_argument("--compare", metavar="OLD", help="another source tree's gpuscope, alternated in the same rounds")
    ap.add_argument("--short", type=float, default=0.2, metavar="S",
                    help="seconds the short program sleeps (0: no short program)")
    ap.add_argument("--skip-pool", action="store_true", help="no pool job")
    ap.add_argument("--no-compile", action="store_true", help="do not compile the trees' byte code ahead")
    args = ap.parse_args()
    # gpuscope finds its data folder as for a user (XDG_DATA_HOME, not GPUSCOPE_HOME), in a fresh
    # folder for each side: the store (its WAL) and the runs of one do not weigh on the other
    base = {k: v for k, v in os.environ.items() if k != "GPUSCOPE_HOME"}
    root = Path(args.root).resolve() if args.root else HERE.parent
    trees = {"gpuscope run": root}
    if args.compare:
        trees = {"gpuscope run (this)": root, "gpuscope run (OLD)": Path(args.compare).resolve()}
    envs = {name: dict(base, PYTHONPATH=str(tree), XDG_DATA_HOME=tempfile.mkdtemp(prefix="gs-bench-"))
            for name, tree in trees.items()}
    if not args.no_compile:
        for tree in trees.values():
            compileall.compile_dir(str(tree / "gpuscope"), quiet=1)
    folder = Path(tempfile.mkdtemp(prefix="gs-bench-"))
    empty, marks = folder / "empty.py", folder / "marks.txt"
    empty.write_text(MARKS)
    # gpuscope as a user starts it: the `gpuscope` command pip installs for the tree, run by this
    # interpreter with the tree on PYTHONPATH
    gs = {name: [sys.executable, str(_command(tree, folder)), "run", "--quiet"] for name, tree in trees.items()}
    print(f"# {os.cpu_count()} CPUs, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}, "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}, "
          f"byte code {'not ' if args.no_compile else ''}compiled ahead, {args.rounds} alternated rounds")
    for name, tree in trees.items():
        print(f"# {name}: {tree}")

    def sides(program: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
        return {"python": ([sys.executable, *program], base),
                **{name: ([*gs[name], *program], envs[name]) for name in trees}}

    def fixed_cost(title: str, program: list[str]) -> None:
        runs = alternate(sides(program), args.rounds, marks)
        plain = runs.pop("python")
        print(f"{title}: python {spread([x[0] for x in plain])}; CPU {ms([x[3] for x in plain])}")
        print(f"  launch -> program's first line: python {ms([x[1] for x in plain])}")
        print(f"  program's exit handler -> command returned: python {ms([x[2] for x in plain])}")
        for name, rows in runs.items():
            fixed = median(rows, 0) - median(plain, 0)
            print(f"{name}: {spread([x[0] for x in rows])}; fixed cost {fixed * 1000:.0f} ms (goal <= 100 ms); "
                  f"CPU {ms([x[3] for x in rows])}")
            print(f"  launch -> program's first line: {ms([x[1] for x in rows])}")
            print(f"  program's exit handler -> command returned: {ms([x[2] for x in rows])}")
        if len(runs) == 2:
            # each round's own difference: the two sides ran next to each other, under the same load
            this, old = runs.values()
            print(f"this minus OLD, per round: wall {ms_signed([a[0] - b[0] for a, b in zip(this, old)])}; "
                  f"CPU {ms_signed([a[3] - b[3] for a, b in zip(this, old)])}")

    fixed_cost("empty script", [str(empty), str(marks)])
    if args.short > 0:
        fixed_cost(f"a {args.short:g} s program (sleeps)", [str(empty), str(marks), str(args.short)])
    if not args.skip_pool:
        script = [str(HERE / "pool_workload.py"), str(args.tasks), str(args.size), str(marks)]
        pool_runs = alternate(sides(script), args.rounds, marks)
        plain = pool_runs.pop("python")
        print(f"pool job ({args.tasks} tasks x {args.size}): python {spread([x[0] for x in plain])}; "
              f"CPU {ms([x[3] for x in plain])}")
        print(f"  launch -> program's first line: python {ms([x[1] for x in plain])}; program's exit handler "
              f"-> command returned: python {ms([x[2] for x in plain])}")
        for name, rows in pool_runs.items():
            # each round's own ratio too: the two ran next to each other, under the same load
            paired = [g[0] / p[0] for g, p in zip(rows, plain)]
            added = [g[3] - p[3] for g, p in zip(rows, plain)]
            print(f"{name}: {spread([x[0] for x in rows])}; ratio {median(rows, 0) / median(plain, 0):.3f}x, "
                  f"+{(median(rows, 0) - median(plain, 0)) * 1000:.0f} ms; per round {statistics.median(paired):.3f}x "
                  f"({min(paired):.3f}-{max(paired):.3f}) (goal <= 1.05x); CPU {ms([x[3] for x in rows])}, "
                  f"added per round {ms(added)}")
            # the end: gpuscope waits for every process of the run (multiprocessing's resource
            # tracker ends right after the main process; plain python returns without it)
            print(f"  launch -> program's first line: {ms([x[1] for x in rows])}; program's exit handler "
                  f"-> command returned: {ms([x[2] for x in rows])}")
            # the steady part of the ratio: the start and the end beyond plain python's, per round
            fixed = [(g[1] - p[1]) + (g[2] - p[2]) for g, p in zip(rows, plain)]
            share = [f / p[0] for f, p in zip(fixed, plain)]
            print(f"  start and end beyond python's, per round: {ms(fixed)}; as a share of the plain job "
                  f"{statistics.median(share) * 100:.1f} % ({min(share) * 100:.1f}-{max(share) * 100:.1f})")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
