"""Build a run store from the run folders (after the old one was found damaged).

Each run folder holds ``spec.json`` (written when the run starts) and, once it ended,
``summary.json`` (status, exit, duration, processes). A run without a summary either still runs
(its gpuscope writes the final row when it ends) or its gpuscope died: it is listed as ``error``.
Processes come from the summary, else from the event logs. Tables SQLite can still read in the
damaged copy (samples, cleanup log, runs) are copied first; the folders then win for runs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from gpuscope import rundir as layout
from gpuscope.status import RunStatus
from gpuscope.store.sqlite import sqlite3

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


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _id_time_ns(run_id: str, fallback: float) -> int:
    try:
        return int(time.mktime(time.strptime(run_id[:15], "%Y%m%d-%H%M%S")) * 1e9)
    except ValueError:
        return int(fallback * 1e9)


def add_folder(conn: sqlite3.Connection, folder: Path) -> bool:
    """Put the run of one folder in the store (its spec and summary); False if not a run folder."""
    meta = _read_json(folder / layout.SPEC)
    if meta is None or not isinstance(meta.get("spec"), dict):
        return False
    spec, run_id = meta["spec"], str(meta.get("run_id") or folder.name)
    summary = _read_json(folder / layout.SUMMARY)
    spec_mtime = os.stat(folder / layout.SPEC).st_mtime
    created = _id_time_ns(run_id, spec_mtime)
    started = int(spec_mtime * 1e9)
    row: dict[str, Any] = {
        "id": run_id, "created_ns": created, "started_ns": started, "script": spec.get("script", "?"),
        "launcher": spec.get("launcher", "python"), "start_method": spec.get("start_method", "default"),
        "run_dir": str(folder), "spec_json": json.dumps(spec), "versions_json": json.dumps(meta.get("versions") or {}),
    }
    if summary is not None:
        duration = float(summary.get("duration_s") or 0.0)
        row.update(status=str(summary.get("status") or RunStatus.ERROR), exit_code=summary.get("exit_code"),
                   signal=summary.get("signal"), error=summary.get("error"),
                   ended_ns=started + int(duration * 1e9), summary_json=json.dumps(summary))
        processes = summary.get("processes") or []
        verb = "INSERT OR REPLACE"
    else:
        row.update(status=str(RunStatus.ERROR), error=NO_SUMMARY)
        processes = _processes_from_events(folder)
        verb = "INSERT OR IGNORE"   # a salvaged row knows more (a live supervisor's pid)
    cols = ", ".join(row)
    conn.execute(f"{verb} INTO runs ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
    if processes:
        from gpuscope.store.runs import replace_processes

        if summary is not None or not conn.execute("SELECT 1 FROM run_processes WHERE run_id=?",
                                                   (run_id,)).fetchone():
            replace_processes(conn, run_id, processes)
    return True


def _processes_from_events(folder: Path) -> list[dict[str, Any]]:
    """The processes of a run without a summary, from its event logs (none if they cannot be read)."""
    if not (folder / layout.EVENTS).is_dir():
        return []
    try:
        from gpuscope.trace.process_rows import collect_processes

        return [p for p in collect_processes(folder) if isinstance(p, dict) and "pid" in p]
    except Exception as exc:  # noqa: BLE001 - a half-written log must not stop the rebuild
        log.warning("%s: event logs not read: %s", folder, exc)
        return []
