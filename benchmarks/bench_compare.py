"""Cost of opening a comparison: two stored runs of 200,000 ranges each (issue 11, goal < 1 s).

Each run: a main process and 8 pool workers x 25,000 ranges (a task range and an NVTX range inside
it, 4 range names), written with the injection's own writer (``pack_ranges``), with the ``C`` lines
of the workers' starts, a summary of 9 processes in the store and a telemetry series. Measured:

* ``read logs``: ``read_run_events`` of both runs (the parsing every reader pays: the baseline);
* ``compare_runs``: the whole comparison the app's tab and ``gpuscope compare`` open (store rows,
  event logs, samples, metrics, ranges, start-up phases, verdict);
* ``to_json + to_markdown``: the exports.

    python benchmarks/bench_compare.py [--rounds 5] [--ranges 200000]

Each figure is the median over ``--rounds`` alternated rounds, with the spread (min-max), and
``compare_runs`` over ``read logs`` as a ratio measured in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_process(folder: Path, pid: int, ppid: int, role: str, method: str, ranges: int, t0: int,
                  children: tuple[int, ...] = ()) -> None:
    from gpuscope.inject.eventlog import pack_ranges

    header = {"v": 1, "pid": pid, "ppid": ppid, "role": "spawn child" if role == "pool worker" else role,
              "start_method": method, "rank": None, "forked": False, "anchor_mono_ns": t0,
              "anchor_wall_ns": 1_700_000_000_000_000_000 + t0}
    lines = [f"H\t{json.dumps(header)}\n"]
    for k, child in enumerate(children):
        lines.append(f"C\t{t0 + 1_000_000 + k}\t{t0 + 2_000_000 + k}\t{child}\n")
    if role != "main":
        lines.append(f"I\t{t0 + 50_000_000}\t{json.dumps({'role': role, 'mp_name': 'PoolWorker'})}\n")
    lines += ["S\t0\ttask\t\tstep\t\n", "S\t1\tnvtx\t\tforward\t\n", "S\t2\tnvtx\t\tbackward\t\n",
              "S\t3\tnvtx\t\tload\t\n"]
    exit_ = {"exit_code": 0, "open_ranges": 0, "cpu_user_s": 1.0, "cpu_system_s": 0.1, "hwm_kib": 50_000}
    lines.append(f"X\t{t0 + 10_000_000_000}\t{json.dumps(exit_)}\n")
    (folder / f"{pid}-{t0}.log").write_text("".join(lines))
    with open(folder / f"{pid}-{t0}.ranges", "wb") as fh:
        start = t0 + 200_000_000
        for block in range(0, ranges, 4096):       # one block per flush, as the injection writes them
            rows = []
            for k in range(block, min(ranges, block + 4096)):
                a = start + k * 40_000
                rows.append((a, a + 30_000, pid, 0, "P") if k % 2 == 0
                            else (a + 1_000, a + 20_000, pid, 1 + k % 3, "P"))
            fh.write(pack_ranges(rows))


def make_run(method: str, ranges: int, workers: int = 8) -> str:
    from gpuscope import rundir
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    run_id = rundir.new_run_id()
    folder = rundir.create_run_dir(run_id)
    events = folder / "events"
    t0 = 1_000_000_000
    pids = [200 + w for w in range(workers)]
    write_process(events, 100, 1, "main", method, 0, t0, children=tuple(pids))
    for w, pid in enumerate(pids):
        write_process(events, pid, 100, "pool worker", method, ranges // workers, t0 + 5_000_000 + w)
    processes = [{"pid": 100, "ppid": 1, "role": "main", "cpu_seconds": 1.1, "peak_rss_bytes": 50 << 20,
                  "cpu_source": "exact", "rss_source": "exact"}]
    processes += [{"pid": p, "ppid": 100, "role": "pool worker", "cpu_seconds": 1.1, "peak_rss_bytes": 40 << 20,
                   "cpu_source": "exact", "rss_source": "exact"} for p in pids]
    spec = {"script": "/bench/train.py", "args": [], "launcher": "python", "start_method": method,
            "python": sys.executable, "nproc": 1, "annotate": [], "cwd": "/bench", "env": {}}
    summary = {"run_id": run_id, "status": "exited", "duration_s": 12.5, "processes": processes}
    # the run's record is its folder's summary.json; the store indexes it
    (folder / "summary.json").write_text(json.dumps({**summary, "started_ns": 1, "ended_ns": 12_500_000_001}))
    with db.connect() as conn:
        store_runs.insert_run(conn, run_id=run_id, spec=spec, run_dir=str(folder), versions={})
        store_runs.mark_started(conn, run_id, 1)
        store_runs.finish_run(conn, run_id, status="exited", ended_ns=12_500_000_001, exit_code=0, signal=None)
    return run_id


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):9.1f}  ({min(values):.1f}-{max(values):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranges", type=int, default=200_000, help="ranges per run")
    args = ap.parse_args()
    os.environ["GPUSCOPE_HOME"] = tempfile.mkdtemp(prefix="gpuscope-bench-compare-")
    from gpuscope.analysis.comparison import compare_runs
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs
    from gpuscope.trace.events import read_run_events

    a, b = make_run("fork", args.ranges), make_run("spawn", args.ranges)
    with db.connect() as conn:
        rows = [store_runs.get_run(conn, r) for r in (a, b)]
    dirs = [row.run_dir for row in rows if row is not None]
    results: dict[str, list[float]] = {"read logs, both runs (ms)": [], "compare_runs (ms)": [],
                                       "to_json + to_markdown (ms)": [], "ratio compare / read": []}
    for _ in range(args.rounds):                      # alternated: each measure once per round
        t = time.perf_counter()
        logs = [read_run_events(d) for d in dirs]
        read_ms = (time.perf_counter() - t) * 1e3
        assert sum(len(pe.ranges) for run in logs for pe in run) == 2 * args.ranges
        t = time.perf_counter()
        comp = compare_runs({"fork": [a], "spawn": [b]})
        cmp_ms = (time.perf_counter() - t) * 1e3
        assert {r.name for r in comp.ranges} == {"step", "forward", "backward", "load"}
        assert sum(r.values["fork"]["count"] for r in comp.ranges) == args.ranges
        t = time.perf_counter()
        json.dumps(comp.to_json())
        comp.to_markdown()
        exp_ms = (time.perf_counter() - t) * 1e3
        results["read logs, both runs (ms)"].append(read_ms)
        results["compare_runs (ms)"].append(cmp_ms)
        results["to_json + to_markdown (ms)"].append(exp_ms)
        results["ratio compare / read"].append(cmp_ms / read_ms)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
          f"rounds {args.rounds}; {args.ranges:,} ranges per run")
    for name, values in results.items():
        if name.startswith("ratio"):
            print(f"{name:30s} {statistics.median(values):9.2f}  ({min(values):.2f}-{max(values):.2f})")
        else:
            print(f"{name:30s} {spread(values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
