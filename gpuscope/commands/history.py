"""``gpuscope history``: past runs from the run store."""

from __future__ import annotations

import argparse
import json
import time

from gpuscope.errors import UserError

HELP = "list past runs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="show one run (an id or a unique prefix)")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    with db.connect() as conn:
        store_runs.mark_abandoned(conn)
        if args.run_id:
            row = store_runs.get_run(conn, args.run_id)
            if row is None:
                raise UserError(f"no run {args.run_id!r} in the store (see `gpuscope history`)")
            procs = store_runs.run_processes(conn, row.id)
            if args.json:
                print(json.dumps({"run": row.__dict__, "processes": procs}, default=str))
            else:
                _print_one(row, procs)
            return 0
        rows = store_runs.list_runs(conn, args.limit)
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], default=str))
        return 0
    if not rows:
        print("no runs yet: start one with `gpuscope run SCRIPT`")
        return 0
    print(f"{'RUN':<21} {'STARTED':<19} {'STATUS':<8} {'EXIT':<9} {'TIME':>8} {'LAUNCH':<16} SCRIPT")
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_ns / 1e9))
        exit_text = r.signal or ("-" if r.exit_code is None else str(r.exit_code))
        dur = f"{r.duration_s:.1f} s" if r.duration_s is not None else "-"
        launch = r.start_method if r.launcher == "python" else f"torchrun×{r.spec.get('nproc')}"
        print(f"{r.id:<21} {started:<19} {r.status:<8} {exit_text:<9} {dur:>8} {launch:<16} {r.script}")
    return 0


def _print_one(row, procs) -> None:
    print(f"run {row.id}: {row.status}, {row.signal or f'exit code {row.exit_code}'}; {row.script}")
    print(f"folder: {row.run_dir}")
    if row.error:
        print(f"error: {row.error}")
    for p in procs:
        print(f"  {p['pid']:>7} {p['role'] or '?':<16} {p['start_method'] or '-':<10} "
              f"rank={p['rank'] if p['rank'] is not None else '-'} ranges={p['ranges']}")
