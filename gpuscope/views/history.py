"""What the History tab lists (Qt-free): stored runs with their disk use, and the start-method
series among them, each shown as one entry that expands into its runs."""

from __future__ import annotations

import shlex
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gpuscope import paths
from gpuscope.errors import UserError
from gpuscope.status import ExitStatus, RunStatus
from gpuscope.views.series_index import SeriesEntry, load_series

COLUMNS = ("Run", "Started", "Script", "Arguments", "Launcher", "Start method", "nsys", "Status", "Duration",
           "Disk")
ARGS_SHOWN = 60          # characters of the Arguments cell (the tooltip has them all)


@dataclass
class HistoryData:
    """What the History tab shows: runs, the disk each takes, the totals, a recovery note, series."""

    rows: list[Any]
    sizes: dict[str, int] = field(default_factory=dict)
    runs_bytes: int = 0
    store_bytes: int = 0
    note: str = ""
    series: list[SeriesEntry] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HistoryData:
        """History as JSON data made it (a remote agent's ``history``: its fields as dicts)."""
        from gpuscope.store.runs import RunRow

        return cls([RunRow.from_dict(r) for r in d.get("rows") or []],
                   {str(k): int(v) for k, v in (d.get("sizes") or {}).items()}, int(d.get("runs_bytes") or 0),
                   int(d.get("store_bytes") or 0), str(d.get("note") or ""),
                   [SeriesEntry.from_dict(s) for s in d.get("series") or []])


@dataclass(frozen=True)
class Entry:
    """One line of the History table: a run (``row``: its index in ``HistoryData.rows``) or a
    series (``series``), ``depth`` 1 for a run shown inside its expanded series."""

    row: int | None = None
    series: SeriesEntry | None = None
    depth: int = 0


def _store_call(fn: Callable[[Any], Any]) -> Any:
    """Run ``fn(conn)`` on the store; a store that cannot be read is a one-line UserError."""
    from gpuscope.store import db

    try:
        conn = db.connect()
        try:
            return fn(conn), conn.recovered
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(f"cannot read the run store {paths.store_path()}: {exc}") from None


def query_runs(limit: int = 200) -> HistoryData:
    """The newest runs, their disk use and the series among them (a pool thread calls this)."""
    from gpuscope.store import retention, runs

    rows, recovered = _store_call(lambda conn: runs.list_runs(conn, limit=limit))
    sizes = {r.id: retention.disk_usage(r.run_dir) for r in rows}
    note = recovered[-1].note(paths.store_path()) if recovered else ""
    listed = {r.id for r in rows}
    series = [s for s in load_series() if any(rid in listed for rid in s.run_ids)]
    return HistoryData(rows, sizes, retention.disk_usage(paths.runs_dir()), retention.store_usage(), note, series)


def delete_runs(ids: list[str]) -> tuple[int, int]:
    """Delete runs by id (a pool thread calls this); returns (runs deleted, bytes freed)."""
    from gpuscope.store import retention

    done, _ = _store_call(lambda conn: retention.delete(conn, retention.resolve(conn, ids)))
    return len(done), sum(d.freed for d in done)


def entries(data: HistoryData, expanded: set[str] | frozenset[str] = frozenset()) -> list[Entry]:
    """The table's lines, newest first: a series takes the place of its newest run, its runs
    follow it (in the order they ran) only when it is expanded."""
    index = {r.id: i for i, r in enumerate(data.rows)}
    owner: dict[str, SeriesEntry] = {}
    for s in data.series:
        for rid in s.run_ids:
            owner.setdefault(rid, s)
    out: list[Entry] = []
    placed: set[str] = set()
    for i, row in enumerate(data.rows):
        found = owner.get(row.id)
        if found is None:
            out.append(Entry(row=i))
        elif found.id not in placed:
            s = found
            placed.add(s.id)
            out.append(Entry(series=s))
            if s.id in expanded:
                ran = sorted((index[rid] for rid in s.run_ids if rid in index),
                             key=lambda j: data.rows[j].started_ns or data.rows[j].created_ns)
                out.extend(Entry(row=j, depth=1) for j in ran)
    return out


def series_rows(data: HistoryData, s: SeriesEntry) -> list[Any]:
    """The stored runs of a series that the history still lists."""
    ids = set(s.run_ids)
    return [r for r in data.rows if r.id in ids]


def series_cells(data: HistoryData, s: SeriesEntry, expanded: bool) -> list[str]:
    """A series' line: what it compared, how many runs, their total time and disk."""
    rows = series_rows(data, s)
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.created_ns / 1e9))
    durations = [r.duration_s for r in rows if r.duration_s is not None]
    nsys = "yes" if any((r.spec.get("nsys") or {}).get("enabled") for r in rows) else ""
    failed = sum(1 for r in rows if not r.status.ok)
    status = f"{len(rows)} runs" + (f", {failed} not exited" if failed else "")
    disk = sum(data.sizes.get(r.id, 0) for r in rows)
    return [f"{'▾' if expanded else '▸'} series {s.id}", started, Path(s.script).name,
            arguments(rows[0]) if rows else "", "compare", s.title, nsys, status,
            f"{sum(durations):.1f} s" if durations else "", human(disk) if rows else ""]


def describe_status(row: Any) -> str:
    """The status cell: the run's status, with how it failed ("failed (killed by SIGKILL)")."""
    if row.status is RunStatus.FAILED:
        return row.status.describe(ExitStatus(row.exit_code, row.signal))
    return row.status.label


def arguments(row: Any) -> str:
    """The run's arguments as a shell would take them (what the launch panel's field holds)."""
    return shlex.join(str(a) for a in row.spec.get("args") or ())


def run_spec(row: Any) -> Any:
    """The RunSpec a stored run was launched with (its spec.json, as the store holds it)."""
    from gpuscope.spec import RunSpec

    return RunSpec.from_dict(row.spec)


def cells(row: Any, size: int | None = None, depth: int = 0) -> list[str]:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((row.started_ns or row.created_ns) / 1e9))
    launcher = row.launcher + (f" ×{row.spec.get('nproc')}" if row.launcher == "torchrun" else "")
    nsys = "yes" if (row.spec.get("nsys") or {}).get("enabled") else ""
    duration = "" if row.duration_s is None else f"{row.duration_s:.1f} s"
    disk = "" if size is None else human(size)
    args = arguments(row)
    args = args if len(args) <= ARGS_SHOWN else args[:ARGS_SHOWN - 1] + "…"
    return [("    " * depth) + row.id, started, Path(row.script).name, args, launcher, row.start_method, nsys,
            describe_status(row), duration, disk]


def human(n: int) -> str:
    from gpuscope.store.retention import human as fmt

    return str(fmt(n))
