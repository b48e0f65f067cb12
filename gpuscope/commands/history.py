"""``gpuscope history``: past runs from the run store; delete and prune them; disk use."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.status import RunStatus

if TYPE_CHECKING:
    from gpuscope.runrecord import RunRecord
    from gpuscope.store.db import StoreConnection
    from gpuscope.store.runs import RunRow

DESCRIPTION = ("List past runs with the disk space each takes, show one, or remove runs: --delete RUN..., "
               "--prune --keep N (keep the N newest), --older-than DAYS. Removing a run deletes its folder "
               "(output, event logs, nsys report) and its rows in the store; a running run is never removed.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="show one run (an id or a unique prefix)")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--json", action="store_true")
    p.add_argument("--delete", action="extend", nargs="+", default=[], metavar="RUN",
                   help="delete these runs (ids or unique prefixes; repeatable)")
    p.add_argument("--prune", action="store_true", help="delete old runs: with --keep and/or --older-than")
    p.add_argument("--keep", type=int, metavar="N", help="--prune: keep the N newest runs")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="delete runs older than DAYS days")
    p.add_argument("--dry-run", action="store_true", help="with --delete/--prune: only say what would go")


def run(args: argparse.Namespace) -> int:
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    removing = args.delete or args.prune or args.older_than is not None
    if args.keep is not None and not args.prune:
        raise UserError("--keep goes with --prune")
    if removing and args.run_id:
        raise UserError("give a run id to show, or --delete/--prune, not both")
    with db.connect() as conn:
        store_runs.mark_abandoned(conn)
        if removing:
            return _remove(conn, args)
        if args.run_id:
            return _show(conn, args)
        rows = store_runs.list_runs(conn, args.limit)
    return _list(rows, args)


def _remove(conn: StoreConnection, args: argparse.Namespace) -> int:
    from gpuscope.store import retention

    if args.delete and (args.prune or args.older_than is not None):
        raise UserError("use --delete or --prune/--older-than, not both")
    if args.delete:
        rows = retention.resolve(conn, args.delete)
    else:
        rows = retention.prune_candidates(conn, keep=args.keep, older_than_days=args.older_than)
    if args.dry_run:
        sizes = {r.id: retention.disk_usage(r.run_dir) for r in rows}
        _report(args, [{"run_id": r.id, "run_dir": r.run_dir, "bytes": sizes[r.id]} for r in rows], True,
                sum(sizes.values()))
        return 0
    done = retention.delete(conn, rows)
    _report(args, [{"run_id": d.run_id, "run_dir": d.run_dir, "bytes": d.freed} for d in done], False,
            sum(d.freed for d in done))
    return 0


def _report(args: argparse.Namespace, items: list[dict], dry: bool, total: int) -> None:
    from gpuscope.store.retention import human

    if args.json:
        print(json.dumps({"dry_run": dry, "runs": items, "bytes": total}))
        return
    verb = "would delete" if dry else "deleted"
    for item in items:
        print(f"{verb} {item['run_id']} ({human(item['bytes'])})")
    print(f"{verb} {len(items)} run(s), {human(total)}" + (" (dry run: nothing was removed)" if dry else " freed"))


def _show(conn: StoreConnection, args: argparse.Namespace) -> int:
    from gpuscope.store.lookup import open_run
    from gpuscope.store import retention
    from gpuscope.store import runs as store_runs

    row = store_runs.get_run(conn, args.run_id)
    if row is None:
        raise UserError(f"no run {args.run_id!r} in the store (see `gpuscope history`)")
    record = open_run(row.run_dir)
    size = retention.disk_usage(row.run_dir)
    if args.json:
        procs = [p.to_dict() for p in record.processes]
        print(json.dumps({"run": _row_json(row), "processes": procs, "disk_bytes": size}, default=str))
    else:
        _print_one(row, record, size)
    return 0


def _row_json(row: RunRow) -> dict[str, Any]:
    """A run's row with its record's JSON form (``summary``: None while it runs)."""
    from gpuscope.rundir import SUMMARY
    from gpuscope.runrecord.folder import read_json

    return dict(row.__dict__, summary=read_json(os.path.join(row.run_dir, SUMMARY)))


def _list(rows: list[RunRow], args: argparse.Namespace) -> int:
    from gpuscope import paths
    from gpuscope.store import retention

    sizes = {r.id: retention.disk_usage(r.run_dir) for r in rows}
    if args.json:
        print(json.dumps([dict(_row_json(r), disk_bytes=sizes[r.id]) for r in rows], default=str))
        return 0
    if not rows:
        print("no runs yet: start one with `gpuscope run SCRIPT`")
        return 0
    print(f"{'RUN':<24} {'STARTED':<19} {'STATUS':<8} {'EXIT':<9} {'TIME':>8} {'DISK':>9} {'LAUNCH':<16} SCRIPT")
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_ns / 1e9))
        exit_text = r.signal or ("-" if r.exit_code is None else str(r.exit_code))
        dur = f"{r.duration_s:.1f} s" if r.duration_s is not None else "-"
        launch = (r.start_method if r.launcher == "python" else r.launcher if r.launcher == "attached"
                  else f"torchrun×{r.spec.get('nproc')}")
        print(f"{r.id:<24} {started:<19} {r.status.label:<8} {exit_text:<9} {dur:>8} {retention.human(sizes[r.id]):>9} "
              f"{launch:<16} {r.script}")
    runs_total = retention.disk_usage(paths.runs_dir())
    print(f"disk: {retention.human(runs_total)} in run folders, {retention.human(retention.store_usage())} "
          f"in the store ({paths.data_dir()}); free space with `gpuscope history --prune --keep N`")
    return 0


def _print_one(row: RunRow, record: RunRecord, size: int) -> None:
    from gpuscope.store.retention import human

    print(f"run {row.id}: {record.describe()}; {row.script}")
    print(f"folder: {row.run_dir} ({human(size)})")
    if record.error and record.status is not RunStatus.ERROR:
        print(f"error: {record.error}")
    for p in record.processes:
        print(f"  {p.pid:>7} {p.role or '?':<16} {p.start_method or '-':<10} "
              f"rank={p.rank if p.rank is not None else '-'} ranges={p.ranges}")
