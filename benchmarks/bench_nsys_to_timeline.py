#!/usr/bin/env python3
"""After a `gpuscope run --nsys`: from the program's exit to the first timeline, step by step.

    .venv/bin/python benchmarks/bench_nsys_to_timeline.py [--version 2024.2] [--ranges-per-process 100000]
                                                          [--rounds 2]

Each round runs ``gpuscope run --nsys --json tests/nsys_read/scripts/pool_script.py spawn --ranges N``
(spawn Pool(2) + parent, N push/pop pairs each) under the provisioned nsys of ``--version``, in a
fresh GPUSCOPE_HOME and an empty parse cache, then opens the run in-process as the app does. It
prints, per round and as medians:

- ``nsys_exit_s``: program exit (the last exit record in gpuscope's own event logs, wall clock) to
  nsys's own exit (the run's start in the store plus its ``duration_s``): nsys writing its report;
- ``import_s``, ``export_s``: QdstrmImporter (when nsys left a .qdstrm) and ``nsys export --type
  sqlite``, as the run's nsys result timed them;
- ``gpuscope_end_s``: the rest of ``gpuscope run`` after nsys exited (output pumps, leftovers,
  diagnostics, the store);
- ``summary_s``: ``load_report(run_dir)``, the tables the app shows first;
- ``timeline_s``: reading the Timeline; ``layout_s``: laying it out for the view (timeline_lod);
- ``exit_to_tables_s`` and ``exit_to_timeline_s``: the sums the user waits for nsys's data;
- ``own_logs_s``: reading gpuscope's own event logs and laying them out
  (``load_events`` + layout), what the app draws once the program has ended (after at most one
  0.2 s poll) while nsys is still busy.

The machine's load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "nsys_read"))
sys.path.insert(0, str(ROOT))

from nsysrec import SCRIPT, find_installs, kill_tagged  # noqa: E402


def one_round(inst, ranges: int, work: Path) -> dict:
    from gpuscope.views import timeline_lod as L
    from gpuscope.nsys.report import load_report
    from gpuscope.trace import events

    home = work / "home"
    env = dict(os.environ, GPUSCOPE_HOME=str(home), GPUSCOPE_CACHE=str(work / "cache"),
               GPUSCOPE_NSYS=str(inst.nsys))
    cmd = [sys.executable, "-m", "gpuscope", "run", "--nsys", "--json", "--quiet", str(SCRIPT),
           "spawn", "--ranges", str(ranges)]
    proc = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=900)
    returned_ns = time.time_ns()
    if proc.returncode != 0:
        raise SystemExit(f"gpuscope run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    nsys = result["nsys"] or {}
    if not nsys.get("ok"):
        raise SystemExit(f"nsys did not produce a report: {nsys.get('reason')}")
    steps = dict((name, sec) for name, sec in nsys["steps"])
    run_dir = Path(result["run_dir"])
    logs = events.read_run_events(run_dir)
    exit_ns = max(pe.wall_ns(pe.end_ns) for pe in logs if pe.end_ns is not None)
    os.environ["GPUSCOPE_CACHE"] = str(work / "cache")
    os.environ["GPUSCOPE_HOME"] = str(home)
    from gpuscope.nsys.report import load_events

    t0 = time.perf_counter()
    L.build_layout(load_events(run_dir).timeline)
    own_logs_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = load_report(run_dir)
    t1 = time.perf_counter()
    tl = rep.timeline
    t2 = time.perf_counter()
    L.build_layout(tl)
    t3 = time.perf_counter()
    from gpuscope.store import db, runs

    conn = db.connect()
    try:
        row = runs.get_run(conn, result["run_id"])
        assert row is not None and row.started_ns is not None
        started_ns = row.started_ns
    finally:
        conn.close()
    nsys_exit_ns = started_ns + int(result["duration_s"] * 1e9)
    run_end_s = (returned_ns - exit_ns) / 1e9
    out = {"ranges": len(tl.ranges), "nsys_exit_s": (nsys_exit_ns - exit_ns) / 1e9,
           "import_s": steps.get("import", 0.0), "export_s": steps.get("export", 0.0)}
    out["gpuscope_end_s"] = (returned_ns - nsys_exit_ns) / 1e9 - out["import_s"] - out["export_s"]
    out.update(summary_s=t1 - t0, timeline_s=t2 - t1, layout_s=t3 - t2)
    out["exit_to_tables_s"] = run_end_s + out["summary_s"]
    out["exit_to_timeline_s"] = out["exit_to_tables_s"] + out["timeline_s"] + out["layout_s"]
    out["own_logs_s"] = own_logs_s
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="2024.2")
    ap.add_argument("--ranges-per-process", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    inst = find_installs().get(args.version)
    if inst is None:
        raise SystemExit(f"nsys {args.version} not provisioned (scripts/provision_nsys.py)")
    load_start = [round(x, 2) for x in os.getloadavg()]
    rounds = []
    try:
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="bench_nsys_tl_") as tmp:
                rounds.append(one_round(inst, args.ranges_per_process, Path(tmp)))
                print(json.dumps(rounds[-1]), flush=True)
    finally:
        kill_tagged()
    medians = {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}
    print(json.dumps({"nsys": inst.version, "rounds": len(rounds), "median": medians,
                      "spread": {k: [min(r[k] for r in rounds), max(r[k] for r in rounds)] for k in rounds[0]},
                      "load_average_start": load_start,
                      "load_average_end": [round(x, 2) for x in os.getloadavg()]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
