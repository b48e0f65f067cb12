"""Removing runs: one by one, or pruning by count and age; and the disk space runs take.

Deleting a run removes its folder (output, event logs, nsys report) and its rows in the store
(the run, its processes, its telemetry samples). A run whose gpuscope is still running it is never
deleted. The cleanup log (``cleanup_actions``) is an audit trail and is kept.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuscope import paths
from gpuscope.errors import UserError
from gpuscope.status import RunStatus
from gpuscope.store import runs as store_runs
from gpuscope.store import samples

if TYPE_CHECKING:
    from gpuscope.store.db import Connection

DAY_NS = 86_400 * 10**9


@dataclass(frozen=True)
class Deleted:
    """A run removed by retention, and the bytes that freed."""

    run_id: str
    run_dir: str
    freed: int          # bytes of the folder that were removed


def disk_usage(path: str | os.PathLike[str]) -> int:
    """Bytes a file or folder takes on disk (allocated blocks; 0 if it is gone)."""
    total = 0
    stack = [os.fspath(path)]
    while stack:
        top = stack.pop()
        try:
            st = os.lstat(top)
        except OSError:
            continue
        total += st.st_blocks * 512
        if os.path.isdir(top) and not os.path.islink(top):
            try:
                stack.extend(e.path for e in os.scandir(top))
            except OSError:
                pass
    return total


def store_usage() -> int:
    """Bytes of the store file and its WAL/shared-memory side files."""
    base = paths.store_path()
    return sum(disk_usage(f"{base}{suffix}") for suffix in ("", "-wal", "-shm"))


def human(n: int) -> str:
    """1.2 MiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def is_running(row: store_runs.RunRow, conn: Connection) -> bool:
    """Whether a live gpuscope still runs this run."""
    if row.status is not RunStatus.RUNNING:
        return False
    r = conn.execute("SELECT supervisor_pid, supervisor_start FROM runs WHERE id=?", (row.id,)).fetchone()
    return r is not None and store_runs.supervisor_alive(r["supervisor_pid"], r["supervisor_start"])


def resolve(conn: Connection, ids: list[str]) -> list[store_runs.RunRow]:
    """The runs named by ids or unique prefixes; a one-line UserError for the first unknown or running one."""
    rows: dict[str, store_runs.RunRow] = {}
    for given in ids:
        row = store_runs.get_run(conn, given)
        if row is None:
            raise UserError(f"no run {given!r} in the store (see `gpuscope history`); nothing was deleted")
        if is_running(row, conn):
            raise UserError(f"run {row.id} is still running (stop it first); nothing was deleted")
        rows[row.id] = row
    return list(rows.values())


def prune_candidates(conn: Connection, *, keep: int | None = None,
                     older_than_days: float | None = None) -> list[store_runs.RunRow]:
    """Finished runs to prune: not among the ``keep`` newest, and (when given) older than the age.

    With both limits a run must be outside both to go; running runs always stay.
    """
    if keep is None and older_than_days is None:
        raise UserError("--prune needs --keep N or --older-than DAYS")
    if (keep is not None and keep < 0) or (older_than_days is not None and older_than_days < 0):
        raise UserError("--keep and --older-than must not be negative")
    rows = conn.execute("SELECT id FROM runs ORDER BY created_ns DESC, id DESC").fetchall()
    ordered = [r["id"] for r in rows]
    if keep is not None:
        ordered = ordered[keep:]
    cutoff = time.time_ns() - int(older_than_days * DAY_NS) if older_than_days is not None else None
    out = []
    for run_id in ordered:
        row = store_runs.get_run(conn, run_id)
        if row is None or is_running(row, conn):
            continue
        if cutoff is not None and row.created_ns >= cutoff:
            continue
        out.append(row)
    return out


def _owned_folder(run_dir: str, run_id: str) -> Path | None:
    """The run's folder if it is gpuscope's (under the runs folder, named by the id), else None."""
    path = Path(run_dir)
    try:
        inside = path.resolve().parent == paths.runs_dir().resolve()
    except OSError:
        return None
    return path if inside and path.name == run_id else None


def delete(conn: Connection, rows: list[store_runs.RunRow]) -> list[Deleted]:
    """Remove the runs' folders and store rows (a folder outside the runs folder is left alone)."""
    done = []
    for row in rows:
        folder = _owned_folder(row.run_dir, row.id)
        freed = disk_usage(folder) if folder is not None else 0
        samples.delete_run_samples(conn, row.id)
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM run_processes WHERE run_id=?", (row.id,))
            conn.execute("DELETE FROM runs WHERE id=?", (row.id,))
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        done.append(Deleted(row.id, row.run_dir, freed))
    return done
