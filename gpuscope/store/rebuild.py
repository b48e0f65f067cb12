"""Build a run store from the run folders (after the old one was found damaged).

Each run folder holds the run's record (:func:`gpuscope.runrecord.read_folder`: ``spec.json``
written when the run starts, ``summary.json`` once it ended); the store's rows are derived from it.
A run without a summary either still runs (its gpuscope writes the final row when it ends) or its
gpuscope died: it is listed as ``error``, its processes read from the event logs. Tables SQLite can
still read in the damaged copy (samples, cleanup log, runs) are copied first; the folders then win
for runs.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope import rundir as layout

if TYPE_CHECKING:
    from gpuscope.store.db import StoreConnection

log = logging.getLogger("gpuscope.store")

# Tables copied from a damaged store when SQLite can still read them (parents before children).
SALVAGE_TABLES = ("runs", "run_processes", "sample_series", "sample_host", "sample_gpu", "sample_proc",
                  "sample_gpu_proc", "sample_procs", "cleanup_actions")
NO_SUMMARY = "no summary.json: gpuscope stopped before the run ended (found when the store was rebuilt)"


def rebuild(path: Path, damaged: Path | None = None) -> tuple[int, list[str]]:
    """Create a new store at ``path`` (absent); returns (runs in it, tables salvaged from ``damaged``)."""
    from gpuscope import paths
    from gpuscope.store import schema

    conn = schema.raw_connect(path)
    try:
        salvaged = salvage(conn, damaged) if damaged is not None else []
        runs = 0
        for folder in sorted(paths.runs_dir().iterdir()):
            if folder.is_dir() and add_folder(conn, folder):
                runs += 1
        count = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        conn.close()
    log.info("rebuilt %s: %d run folder(s), %d run(s)", path, runs, count)
    return int(count), salvaged


def salvage(conn: sqlite3.Connection, damaged: Path) -> list[str]:
    """Copy each table that reads whole from the damaged file; returns the names copied."""
    copied: list[str] = []
    try:
        conn.execute("ATTACH DATABASE ? AS old", (f"file:{damaged}?mode=ro",))
    except sqlite3.DatabaseError:
        return copied
    try:
        for table in SALVAGE_TABLES:
            if _copy_table(conn, table):
                copied.append(table)
    finally:
        try:
            conn.execute("DETACH DATABASE old")
        except sqlite3.DatabaseError:
            pass
    return copied


def _copy_table(conn: sqlite3.Connection, table: str) -> bool:
    try:
        old = [r[1] for r in conn.execute(f"PRAGMA old.table_info({table})")]
        new = {r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")}
        cols = ", ".join(c for c in old if c in new)
        if not cols:
            return False
        conn.execute("BEGIN")
        conn.execute(f"INSERT OR IGNORE INTO main.{table} ({cols}) SELECT {cols} FROM old.{table}")
        conn.execute("COMMIT")
        return True
    except sqlite3.DatabaseError:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False


def _id_time_ns(run_id: str, fallback: float) -> int:
    try:
        return int(time.mktime(time.strptime(run_id[:15], "%Y%m%d-%H%M%S")) * 1e9)
    except ValueError:
        return int(fallback * 1e9)


def add_folder(conn: sqlite3.Connection | StoreConnection, folder: Path) -> bool:
    """Index the run of one folder in the store (its record); False if not a run folder."""
    from gpuscope.runrecord.folder import read_folder, read_json

    meta = read_json(str(folder / layout.SPEC))
    if meta is None or not isinstance(meta.get("spec"), dict):
        return False
    finished = (folder / layout.SUMMARY).is_file()
    record = read_folder(folder)
    if not finished:
        record.error = NO_SUMMARY
    spec = record.spec
    row: dict[str, Any] = {
        "id": record.run_id, "created_ns": _id_time_ns(record.run_id, os.stat(folder / layout.SPEC).st_mtime),
        "started_ns": record.started_ns, "ended_ns": record.ended_ns or None, "status": record.status.value,
        "exit_code": record.exit.code, "signal": record.exit.signal, "error": record.error,
        "script": spec.get("script", "?"), "launcher": spec.get("launcher", "python"),
        "start_method": spec.get("start_method", "default"), "run_dir": str(folder),
        "spec_json": json.dumps(spec), "versions_json": json.dumps(record.versions),
    }
    # a salvaged row of a run without a summary knows more (a live supervisor's pid)
    verb = "INSERT OR REPLACE" if finished else "INSERT OR IGNORE"
    cols = ", ".join(row)
    conn.execute(f"{verb} INTO runs ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
    if record.processes:
        from gpuscope.store.runs import replace_processes

        if finished or not conn.execute("SELECT 1 FROM run_processes WHERE run_id=?",
                                        (record.run_id,)).fetchone():
            replace_processes(conn, record.run_id, record.processes)
    return True
