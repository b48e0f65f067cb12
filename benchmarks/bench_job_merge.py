#!/usr/bin/env python3
"""Benchmark merging the node runs of a torchrun job across nodes (`gpuscope report JOB_DIR`).

    .venv/bin/python benchmarks/bench_job_merge.py [--nodes 8] [--ranges 250000] [--ranks 4] [--rounds 5]

Writes a job folder of ``--nodes`` synthetic node runs (tests/runs/jobfolder.py: event logs with
the injection's own range writer, ``node.json`` with an anchor and a clock offset per node), each
with ``--ranges`` ranges over ``--ranks`` ranks, and the same ranges as ONE run folder (every rank's
log in one events/ folder: what a single machine with all those ranks would leave). Then, alternated,
``--rounds`` times:

* merge: ``load_job`` (read every node, align the clocks, merge, summaries, per-rank table, stragglers)
* baseline: ``load_run`` of the one-folder run (read, timeline, summaries) of the same ranges
* ``gpuscope report --json JOB_DIR`` as a whole process (interpreter start and imports included)

and prints medians with their spread (min-max), wall and CPU (process time) for the in-process
loads, the ratio merge / baseline, the merge time per million ranges, and the load average. The
cost a node adds to its own run is measured too: the clock exchange (16 round trips, localhost)
and copying one node run into the job folder (to a local folder: a lower bound for a shared one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuscope.nsys.report import load_job, load_run  # noqa: E402
from gpuscope.runs import clocksync  # noqa: E402
from gpuscope.runs.recorders.node_job import copy_run  # noqa: E402
from tests.runs import jobfolder  # noqa: E402


def one_folder(job: Path, target: Path) -> Path:
    """Every node's event logs in one run folder (their pids made distinct, as on one host)."""
    events = target / "events"
    events.mkdir(parents=True)
    for k, node in enumerate(sorted(job.glob("node*"))):
        for f in (node / "events").iterdir():
            pid, rest = f.name.split("-", 1)
            new = events / f"{int(pid) + 10_000 * k}-{rest}"
            if f.suffix == ".log":
                text = f.read_text().replace(f'"pid": {pid},', f'"pid": {int(pid) + 10_000 * k},', 1)
                new.write_text(text)
            else:
                shutil.copy(f, new)
    return target


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.3f} s  ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--ranges", type=int, default=250_000, help="ranges per node")
    ap.add_argument("--ranks", type=int, default=4, help="ranks per node")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gpuscope-bench-job-"))
    try:
        steps = args.ranges // args.ranks
        offsets = [0] + [(k * 7_919_000) * (-1) ** k for k in range(1, args.nodes)]
        job = jobfolder.make_job(tmp / "job", args.nodes, args.ranks, steps, offsets=offsets, slow={1: 1.2})
        single = one_folder(job, tmp / "single")
        total = args.nodes * args.ranks * steps
        env = dict(os.environ, GPUSCOPE_HOME=str(tmp / "home"))
        env.pop("PYTHONPATH", None)
        res: dict[str, list[float]] = {"merge (load_job)": [], "baseline (load_run, one folder)": [],
                                       "merge CPU": [], "baseline CPU": [], "gpuscope report --json JOB_DIR": [],
                                       "clock exchange (16 round trips)": [], "copy one node run": []}
        server = clocksync.ClockServer("127.0.0.1")
        node0 = next(job.glob("node0-*"))
        size = sum(f.stat().st_size for f in node0.rglob("*") if f.is_file())
        for i in range(args.rounds):
            t, c = time.perf_counter(), time.process_time()
            rep = load_job(job)
            res["merge (load_job)"].append(time.perf_counter() - t)
            res["merge CPU"].append(time.process_time() - c)
            assert rep.job is not None
            assert len(rep.timeline.ranges) == total and rep.job["stragglers"]["slowest_rank"] == 1
            del rep
            t, c = time.perf_counter(), time.process_time()
            base = load_run(single)
            res["baseline (load_run, one folder)"].append(time.perf_counter() - t)
            res["baseline CPU"].append(time.process_time() - c)
            assert len(base.timeline.ranges) == total
            del base
            t = time.perf_counter()
            clocksync.measure("127.0.0.1", server.port)
            res["clock exchange (16 round trips)"].append(time.perf_counter() - t)
            t = time.perf_counter()
            copy_run(node0, tmp / f"copy{i}")
            res["copy one node run"].append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpuscope", "report", "--json", str(job)], env=env, cwd=ROOT,
                           check=True, stdout=subprocess.DEVNULL, timeout=600)
            res["gpuscope report --json JOB_DIR"].append(time.perf_counter() - t)
        print(f"{args.nodes} node runs x {args.ranges:,} ranges ({args.ranks} ranks each) = {total:,} ranges; "
              f"rounds {args.rounds}; machine: {os.cpu_count()} cores, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
        for name, values in res.items():
            print(f"{name:34s} {spread(values)}")
        server.close()
        print(f"(one node run: {size / 1e6:.1f} MB)")
        for what in ("", " CPU"):
            m_key, b_key = (("merge (load_job)", "baseline (load_run, one folder)") if not what
                            else ("merge CPU", "baseline CPU"))
            ratios = [m / b for m, b in zip(res[m_key], res[b_key])]
            print(f"{'merge / baseline' + what:34s} {statistics.median(ratios):8.2f}    "
                  f"({min(ratios):.2f}-{max(ratios):.2f})")
        per_m = [m / (total / 1e6) for m in res["merge (load_job)"]]
        print(f"{'merge per million ranges':34s} {spread(per_m)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
