#!/usr/bin/env python3
"""Benchmark `gpuscope report` against `nsys stats` on a real recording with many NVTX ranges.

    .venv/bin/python benchmarks/bench_report.py [--version 2024.2] [--ranges-per-process 140000]
                                                [--repeats 5] [--keep DIR]

1. Records tests/nsys_read/scripts/pool_script.py (spawn Pool(2) + parent, each doing N push/pop
   pairs; `--trace=nvtx`) under the provisioned nsys, and exports it to SQLite.
2. Times whole processes on that file, alternating: `python -m gpuscope report --json X.sqlite`
   with ``--no-cache`` (cold: parse the SQLite file) and without (the parsed-report cache, filled by
   the warm-up run) vs `nsys stats --report nvtx_sum X.sqlite` (same file, same nsys version);
   prints wall and CPU medians (CPU = user+sys of the process tree; fairer on a loaded machine).
3. Times the in-process Timeline load (best of 3) and measures bytes per range (column nbytes and
   tracemalloc peak of a load).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "nsys_read"))
sys.path.insert(0, str(ROOT))

from nsysrec import find_installs, kill_tagged, record  # noqa: E402

from gpuscope.nsys import reader  # noqa: E402


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child and its descendants) of one whole-process run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-1000:]}")
    return elapsed, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def load_figures(path: Path) -> dict:
    best, best_cpu = float("inf"), float("inf")
    for _ in range(3):
        conn = reader.open_export(path)
        t0, c0 = time.perf_counter(), time.process_time()
        tl = reader.read_timeline(conn)
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
        conn.close()
    n = len(tl.ranges)
    tracemalloc.start()
    conn = reader.open_export(path)
    tl2 = reader.read_timeline(conn)
    _, peak = tracemalloc.get_traced_memory()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    conn.close()
    return {"ranges": n, "load_s": round(best, 3), "load_s_per_million": round(best / n * 1e6, 3),
            "load_cpu_s_per_million": round(best_cpu / n * 1e6, 3),
            "column_bytes_per_range": round(tl.ranges.nbytes() / n, 1),
            "timeline_bytes_per_range": round(tl.nbytes() / n, 1),
            "tracemalloc_retained_bytes_per_range": round(current / n, 1) if len(tl2.ranges) else None,
            "tracemalloc_peak_bytes_per_range": round(peak / n, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="2024.2")
    ap.add_argument("--ranges-per-process", type=int, default=140_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", help="folder for the recording (default: a temp folder)")
    args = ap.parse_args()
    inst = find_installs().get(args.version)
    if inst is None:
        raise SystemExit(f"nsys {args.version} not provisioned (scripts/provision_nsys.py)")
    folder = Path(args.keep or tempfile.mkdtemp(prefix="bench_report_"))
    try:
        t0 = time.perf_counter()
        sqlite = record(inst, folder, "bench", ["spawn", "--ranges", str(args.ranges_per_process)])
        print(f"recorded + exported in {time.perf_counter() - t0:.1f} s: {sqlite}", flush=True)
    finally:
        kill_tagged()
    ours_cmd = [sys.executable, "-m", "gpuscope", "report", "--json", str(sqlite)]
    theirs_cmd = [str(inst.nsys), "stats", "--report", inst.report_name("nvtx_sum"), "--format", "csv",
                  "--output", "-", str(sqlite)]
    cmds = {"gpuscope_cold": ours_cmd + ["--no-cache"], "gpuscope_cached": ours_cmd, "nsys_stats": theirs_cmd}
    for cmd in cmds.values():
        timed(cmd)                  # warm the page cache, both interpreters and gpuscope's report cache
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(args.repeats):   # alternate A/B/C
        for name, cmd in cmds.items():
            runs[name].append(timed(cmd))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
    result = {"nsys": inst.version, "file": str(sqlite), "file_mb": round(sqlite.stat().st_size / 2**20, 1),
              "load_average": [round(x, 2) for x in os.getloadavg()],
              "wall_s": {k: [round(w, 3) for w, _ in v] for k, v in runs.items()},
              "median_wall_s": {k: round(v[0], 3) for k, v in med.items()},
              "median_cpu_s": {k: round(v[1], 3) for k, v in med.items()},
              "speedup_wall_cold": round(med["nsys_stats"][0] / med["gpuscope_cold"][0], 2),
              "speedup_wall_cached": round(med["nsys_stats"][0] / med["gpuscope_cached"][0], 2),
              "speedup_cpu_cold": round(med["nsys_stats"][1] / med["gpuscope_cold"][1], 2),
              "speedup_cpu_cached": round(med["nsys_stats"][1] / med["gpuscope_cached"][1], 2)}
    result.update(load_figures(sqlite))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
