#!/usr/bin/env python3
"""Benchmark `gpuscope report` against `nsys stats` on a real recording with many NVTX ranges.

    .venv/bin/python benchmarks/bench_report.py [--version 2024.2] [--ranges-per-process 140000]
                                                [--repeats 5] [--keep DIR] [--sqlite X.sqlite]

1. Records tests/nsys_read/scripts/pool_script.py (spawn Pool(2) + parent, each doing N push/pop
   pairs; `--trace=nvtx`) under the provisioned nsys, and exports it to SQLite.
   ``--sqlite X.sqlite`` skips this and uses an export made before (with ``--version``'s nsys).
2. Times whole processes on that file, alternating: `python -m gpuscope report --json X.sqlite`
   on a first open (``GPUSCOPE_CACHE`` set to a new empty folder for every run: no parse cache),
   the same without the compiled modules (``GPUSCOPE_NO_COMPILED=1``), and opened again (a
   cache filled by reading the timeline once) vs `nsys stats --report nvtx_sum X.sqlite` (same
   file, same nsys version); prints wall and CPU medians and their spread
   (CPU = user+sys of the process tree; fairer on a loaded machine) and the ratios to nsys stats.
3. Times the in-process Timeline load (best of 3; CPU = process time of all threads) through the
   page reader (compiled where built: ``"compiled": true``), and for comparison through the
   numpy page decoder (``GPUSCOPE_NO_COMPILED=1``) and through sqlite3 alone
   (``GPUSCOPE_NO_PAGE_READER=1``), and measures bytes per range (column nbytes and tracemalloc
   peak of a load).

The load average is printed at the start and the end: on a shared machine say what it was doing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall s, CPU s of the child and its descendants) of one whole-process run (``env["cwd"]``:
    run in that folder)."""
    cwd = None
    if env is not None:
        env = dict(os.environ, **env)
        cwd = env.pop("cwd", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600, env=env,
                          cwd=cwd)
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-1000:]}")
    return elapsed, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _best_load(path: Path, rounds: int = 3):
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        conn = reader.open_export(path)
        t0, c0 = time.perf_counter(), time.process_time()
        tl = reader.read_timeline(conn)
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
        conn.close()
    return tl, best, best_cpu


def reader_compiled() -> bool:
    from gpuscope.nsys import pages
    from gpuscope.trace import timeline

    return pages.compiled() and timeline._nesting is not None


def load_figures(path: Path) -> dict:
    os.environ["GPUSCOPE_NO_PAGE_READER"] = "1"
    _, sq_best, sq_cpu = _best_load(path)
    del os.environ["GPUSCOPE_NO_PAGE_READER"]
    os.environ["GPUSCOPE_NO_COMPILED"] = "1"
    _, np_best, np_cpu = _best_load(path)
    del os.environ["GPUSCOPE_NO_COMPILED"]
    tl, best, best_cpu = _best_load(path)
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
            "compiled": reader_compiled(),
            "numpy_pages_load_cpu_s_per_million": round(np_cpu / n * 1e6, 3),
            "sqlite3_path_load_s_per_million": round(sq_best / n * 1e6, 3),
            "sqlite3_path_load_cpu_s_per_million": round(sq_cpu / n * 1e6, 3),
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
    ap.add_argument("--sqlite", help="use this export instead of recording one")
    ap.add_argument("--compare-tree", metavar="DIR", help="also time a first open by the gpuscope of another "
                    "source tree (e.g. `git archive <commit> | tar -x -C DIR`), alternated in the same rounds")
    args = ap.parse_args()
    inst = find_installs().get(args.version)
    if inst is None:
        raise SystemExit(f"nsys {args.version} not provisioned (scripts/provision_nsys.py)")
    sqlite = Path(args.sqlite) if args.sqlite else _record(inst, args)
    load_start = [round(x, 2) for x in os.getloadavg()]
    caches = Path(tempfile.mkdtemp(prefix="bench_report_cache_"))
    warm_cache = caches / "warm"
    subprocess.run([sys.executable, "-c", "import sys; from gpuscope.nsys.report import load_report; "
                    "load_report(sys.argv[1]).timeline", str(sqlite)],
                   env=dict(os.environ, GPUSCOPE_CACHE=str(warm_cache)), check=True)   # fills the cache
    ours_cmd = [sys.executable, "-m", "gpuscope", "report", "--json", str(sqlite)]
    theirs_cmd = [str(inst.nsys), "stats", "--report", inst.report_name("nvtx_sum"), "--format", "csv",
                  "--output", "-", str(sqlite)]
    fresh = iter(range(10**6))
    cmds = {"gpuscope_first_open": (ours_cmd, lambda: {"GPUSCOPE_CACHE": str(caches / f"c{next(fresh)}")}),
            "gpuscope_cached": (ours_cmd, lambda: {"GPUSCOPE_CACHE": str(warm_cache)}),
            # the same tree without its compiled modules (as installed where no C compiler was found)
            "gpuscope_first_open_no_compiled": (ours_cmd, lambda: {"GPUSCOPE_CACHE": str(caches / f"c{next(fresh)}"),
                                                                   "GPUSCOPE_NO_COMPILED": "1"}),
            "nsys_stats": (theirs_cmd, lambda: None)}
    if args.compare_tree:
        cmds["other_tree_first_open"] = (ours_cmd, lambda: {"GPUSCOPE_CACHE": str(caches / f"c{next(fresh)}"),
                                                            "PYTHONPATH": str(Path(args.compare_tree).resolve()),
                                                            "cwd": str(Path(args.compare_tree).resolve())})
    for cmd, env in cmds.values():
        timed(cmd, env())           # warm the page cache and both interpreters
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(args.repeats):   # alternate A/B/C
        for name, (cmd, env) in cmds.items():
            runs[name].append(timed(cmd, env()))
    result = {"nsys": inst.version, "file": str(sqlite), "file_mb": round(sqlite.stat().st_size / 2**20, 1),
              "load_average_start": load_start, "load_average": [round(x, 2) for x in os.getloadavg()]}
    result.update(_ratios(runs))
    result.update(load_figures(sqlite))
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    shutil.rmtree(caches, ignore_errors=True)
    print(json.dumps(result, indent=1))
    return 0


def _record(inst, args) -> Path:
    folder = Path(args.keep or tempfile.mkdtemp(prefix="bench_report_"))
    try:
        t0 = time.perf_counter()
        sqlite = record(inst, folder, "bench", ["spawn", "--ranges", str(args.ranges_per_process)])
        print(f"recorded + exported in {time.perf_counter() - t0:.1f} s: {sqlite}", flush=True)
    finally:
        kill_tagged()
    return sqlite


def _ratios(runs: dict[str, list[tuple[float, float]]]) -> dict:
    """Medians, spreads (min..max) and ratios to nsys stats, wall and CPU (< 1: gpuscope faster)."""
    out: dict = {"wall_s": {k: [round(w, 3) for w, _ in v] for k, v in runs.items()},
                 "cpu_s": {k: [round(c, 3) for _, c in v] for k, v in runs.items()}}
    for kind, i in (("wall", 0), ("cpu", 1)):
        med = {k: statistics.median(x[i] for x in v) for k, v in runs.items()}
        out[f"median_{kind}_s"] = {k: round(m, 3) for k, m in med.items()}
        for k in runs:
            if k != "nsys_stats":
                out[f"ratio_{kind}_{k}"] = round(med[k] / med["nsys_stats"], 2)
        # per-round ratios: how much the alternated pairs disagree
        pairs = [a[i] / b[i] for a, b in zip(runs["gpuscope_first_open"], runs["nsys_stats"])]
        out[f"ratio_{kind}_first_open_per_round"] = [round(x, 2) for x in pairs]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
