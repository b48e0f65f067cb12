"""Runs and their processes in the run store: an index derived from the run folders.

A run's record lives in its folder (:mod:`gpuscope.runrecord`: ``spec.json``, ``summary.json``);
the ``runs`` row holds what listing and sorting need (status, times, script, the folder) and the
``run_processes`` rows what looking a process up by pid needs (cleanup: pid, role, start time).
Both are written from the record and rebuilt from the folders (:mod:`gpuscope.store.rebuild`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from gpuscope.status import ExitStatus, RunStatus

if TYPE_CHECKING:
    from typing import Any, Iterable

    from gpuscope.store.db import Connection
    from gpuscope.trace.process_row import ProcessRow


# the tables: gpuscope.store.tables.RUNS
FINAL_STATUSES = tuple(s.value for s in RunStatus if s.final)


@dataclass(frozen=True)
class RunRow:
    """One row of the ``runs`` table."""

    id: str
    created_ns: int
    started_ns: int | None
    ended_ns: int | None
    status: RunStatus
    exit_code: int | None
    signal: str | None
    script: str
    launcher: str
    start_method: str
    run_dir: str
    spec: dict[str, Any]
    versions: dict[str, Any]
    error: str | None

    @property
    def duration_s(self) -> float | None:
        if self.started_ns is None or self.ended_ns is None:
            return None
        return (self.ended_ns - self.started_ns) / 1e9

    def describe(self) -> str:
        """"exited (exit code 0)", "failed (killed by SIGKILL)", "stopped", ... (:class:`RunStatus`)."""
        return self.status.describe(ExitStatus(self.exit_code, self.signal), self.error)

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON data (the status as its value)."""
        return {**asdict(self), "status": self.status.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRow:
        """The row :meth:`to_dict` made (a remote agent's History); unknown keys ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in names}, "status": RunStatus.parse(d.get("status")),
                      "spec": d.get("spec") or {}, "versions": d.get("versions") or {}})


def _row(r: sqlite3.Row) -> RunRow:
    return RunRow(
        id=r["id"], created_ns=r["created_ns"], started_ns=r["started_ns"], ended_ns=r["ended_ns"],
        status=RunStatus.parse(r["status"]), exit_code=r["exit_code"], signal=r["signal"], script=r["script"],
        launcher=r["launcher"], start_method=r["start_method"], run_dir=r["run_dir"],
        spec=json.loads(r["spec_json"]), versions=json.loads(r["versions_json"] or "{}"),
        error=r["error"],
    )


def insert_run(conn: Connection, *, run_id: str, spec: dict[str, Any], run_dir: str,
               versions: dict[str, Any]) -> None:
    pid = os.getpid()
    # A store rebuilt while this run started (recovery) may already list it from its folder: this
    # process knows better, so its row replaces that one.
    conn.execute(
        "INSERT OR REPLACE INTO runs (id, created_ns, status, script, launcher, start_method, run_dir,"
        " spec_json, versions_json, supervisor_pid, supervisor_start) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (run_id, time.time_ns(), RunStatus.RUNNING.value, spec["script"], spec["launcher"], spec["start_method"],
         run_dir, json.dumps(spec), json.dumps(versions), pid, _start_ticks(pid)),
    )


def _start_ticks(pid: int) -> int | None:
    """A live process's start time in clock ticks after boot (None if gone or a zombie)."""
    from gpuscope.procs.read import read

    info = read(pid)
    return None if info is None or info.is_zombie else info.start_ticks


def mark_abandoned(conn: Connection) -> list[str]:
    """Runs still 'running' whose gpuscope process is gone (crashed, killed): mark them failed.

    Returns their ids. A run whose supervisor is alive (this or another gpuscope) is left alone.
    """
    rows = conn.execute("SELECT id, supervisor_pid, supervisor_start FROM runs WHERE status=?",
                        (RunStatus.RUNNING.value,)).fetchall()
    gone = [r["id"] for r in rows if not supervisor_alive(r["supervisor_pid"], r["supervisor_start"])]
    for run_id in gone:
        conn.execute("UPDATE runs SET status=?, error=coalesce(error, ?) WHERE id=? AND status=?",
                     (RunStatus.ERROR.value, "gpuscope stopped before the run ended; its processes may still "
                      "be alive (see gpuscope cleanup)", run_id, RunStatus.RUNNING.value))
    return gone


def supervisor_alive(pid: int | None, start_ticks: int | None) -> bool:
    """Whether the gpuscope process that runs a run is still the same live process."""
    return pid is not None and _start_ticks(pid) == start_ticks


def mark_started(conn: Connection, run_id: str, started_ns: int) -> None:
    conn.execute("UPDATE runs SET started_ns=? WHERE id=?", (started_ns, run_id))


def finish_run(conn: Connection, run_id: str, *, status: str | RunStatus, ended_ns: int,
               exit_code: int | None, signal: str | None, error: str | None = None,
               processes: Iterable[ProcessRow] | None = None) -> None:
    """The run's end; with ``processes``, its process rows too, in the same transaction."""
    values = (RunStatus(status).value, ended_ns, exit_code, signal, error, run_id)
    update = "UPDATE runs SET status=?, ended_ns=?, exit_code=?, signal=?, error=? WHERE id=?"
    if processes is None:
        conn.execute(update, values)
    else:
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(update, values)
            _write_processes(conn, run_id, processes)
    _make_folder_private(conn, run_id)


def _make_folder_private(conn: Connection, run_id: str) -> None:
    """The run's files were written with the user's umask (often 0644): make them 0600 now."""
    from gpuscope.paths import make_private

    r = conn.execute("SELECT run_dir FROM runs WHERE id=?", (run_id,)).fetchone()
    if r is not None and r["run_dir"] and os.path.isdir(r["run_dir"]):
        make_private(r["run_dir"])


def replace_processes(conn: Connection, run_id: str, procs: Iterable[ProcessRow]) -> None:
    """Index the run's processes (its record's rows) in one transaction."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        _write_processes(conn, run_id, procs)


def _write_processes(conn: Connection, run_id: str, procs: Iterable[ProcessRow]) -> None:
    rows = [
        (run_id, p.pid, p.ppid, p.role, p.start_method, p.rank, p.name, p.started_ns, p.ended_ns, p.exit_code,
         p.ranges, json.dumps(p.info))
        for p in procs
    ]
    conn.execute("DELETE FROM run_processes WHERE run_id=?", (run_id,))
    conn.executemany(
        "INSERT OR REPLACE INTO run_processes (run_id, pid, ppid, role, start_method, rank, name,"
        " started_ns, ended_ns, exit_code, ranges, info_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )


def get_run(conn: Connection, run_id: str) -> RunRow | None:
    """A run by its id, or by a unique prefix of it."""
    r = conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
    if r is None:
        rows = conn.execute("SELECT * FROM runs WHERE id LIKE ? || '%' LIMIT 2", (run_id,)).fetchall()
        r = rows[0] if len(rows) == 1 else None
    return _row(r) if r is not None else None


def list_runs(conn: Connection, limit: int = 50) -> list[RunRow]:
    rows = conn.execute("SELECT * FROM runs ORDER BY created_ns DESC LIMIT ?", (limit,)).fetchall()
    return [_row(r) for r in rows]
