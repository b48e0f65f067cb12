"""Linking live processes to gpuscope runs in the store.

A live process belongs to a finished run for one of the reasons of
:class:`gpuscope.procs.membership.Reason`: ``recorded`` (a ``run_processes`` row of that run has its pid
and create time, ``info_json["create_time"]``; without it, a start time inside the run), ``env``
(its environment carries ``GPUSCOPE_RUN_ID`` of that run: escaped children the table missed), or
``parent`` (its parent is a linked process and it started after it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
import sqlite3
import time
from dataclasses import dataclass

from gpuscope.cleanup.evidence import human_s
from gpuscope.cleanup.snapshot import ProcInfo, ProcTable
from gpuscope.procs.membership import RUN_ID_VAR, Reason
from gpuscope.status import RunStatus
from gpuscope.store.runs import FINAL_STATUSES

if TYPE_CHECKING:
    from gpuscope.store.db import Connection

CREATE_TIME_TOLERANCE_S = 0.01


@dataclass
class RunLink:
    """The run a leftover process belongs to, and how that was found."""

    run_id: str
    status: str
    ended_ns: int | None
    how: str            # the reason in words, e.g. "run table (pid + create time)"
    role: str | None = None
    reason: Reason = Reason.RECORDED

    def text(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        ended = ""
        if self.ended_ns:
            ended = f" ended {human_s(now - self.ended_ns / 1e9)} ago ({self.status})"
        else:
            ended = f" is {self.status}"
        role = f"role in that run: {self.role}; " if self.role else ""
        return f"still alive although gpuscope run {self.run_id}{ended}; {role}matched by {self.how}"


def _runs(conn: Connection) -> dict[str, sqlite3.Row]:
    rows = conn.execute("SELECT id, status, started_ns, ended_ns FROM runs").fetchall()
    return {r["id"]: r for r in rows}


def _table_rows(conn: Connection, pids: list[int]) -> list[sqlite3.Row]:
    rows: list[sqlite3.Row] = []
    marks = ",".join("?" * len(FINAL_STATUSES))
    for i in range(0, len(pids), 400):
        chunk = pids[i:i + 400]
        rows += conn.execute(
            f"SELECT rp.run_id, rp.pid, rp.role, rp.info_json FROM run_processes rp"
            f" JOIN runs r ON r.id = rp.run_id WHERE r.status IN ({marks})"
            f" AND rp.pid IN ({','.join('?' * len(chunk))})",
            (*FINAL_STATUSES, *chunk)).fetchall()
    return rows


def _matches(proc: ProcInfo, info: dict, run: sqlite3.Row) -> str | None:
    ct = info.get("create_time")
    if isinstance(ct, (int, float)):
        if abs(float(ct) - proc.create_time) <= CREATE_TIME_TOLERANCE_S:
            return "run table (pid + create time)"
        return None
    start, end = run["started_ns"], run["ended_ns"]
    if start and end and start / 1e9 - 1.0 <= proc.create_time <= end / 1e9:
        return "run table (pid + start time)"
    return None


def link_runs(conn: Connection, table: ProcTable) -> dict[int, RunLink]:
    """pid -> the finished run a live process came from."""
    from gpuscope.store.runs import mark_abandoned

    mark_abandoned(conn)  # a run whose gpuscope died counts as finished: its leftovers are listed
    runs = _runs(conn)
    if not runs:
        return {}
    links: dict[int, RunLink] = {}
    for row in _table_rows(conn, [p.pid for p in table]):
        proc = table.get(row["pid"])
        run = runs.get(row["run_id"])
        if proc is None or run is None:
            continue
        how = _matches(proc, json.loads(row["info_json"] or "{}"), run)
        if how:
            links[proc.pid] = RunLink(run["id"], run["status"], run["ended_ns"], how, row["role"])
    for proc in table:
        if proc.pid in links or proc.is_kernel_thread:
            continue
        run_id = proc.environ.get(RUN_ID_VAR)
        run = runs.get(run_id) if run_id else None
        if run is not None and RunStatus.parse(run["status"]).final:
            links[proc.pid] = RunLink(run["id"], run["status"], run["ended_ns"],
                                      "GPUSCOPE_RUN_ID in its environment", reason=Reason.ENV)
    _link_children(table, links)
    return links


def _link_children(table: ProcTable, links: dict[int, RunLink]) -> None:
    """Children of linked processes belong to the same run (the ``parent`` rule)."""
    changed = True
    while changed:
        changed = False
        for proc in table:
            parent = links.get(proc.ppid)
            if proc.pid in links or parent is None or proc.is_kernel_thread:
                continue
            if proc.start_ticks < table.procs[proc.ppid].start_ticks:
                continue
            links[proc.pid] = RunLink(parent.run_id, parent.status, parent.ended_ns,
                                      f"its parent (pid {proc.ppid}) is of that run",
                                      reason=Reason.PARENT)
            changed = True
