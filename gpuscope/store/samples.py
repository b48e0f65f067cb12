"""Telemetry samples in the run store (owned by gpuscope.telemetry).

One ``sample_series`` row per sampled run (an integer key, the clock anchors, notes); per-kind
tables keyed by (series, subject, t_ns) ``WITHOUT ROWID``: ``sample_host``, ``sample_gpu``,
``sample_proc`` (one row per process and tick), ``sample_gpu_proc`` (one row per GPU process,
device and tick), and ``sample_procs`` (one row per process: identity and totals). Times are
CLOCK_MONOTONIC ns, as in the event logs; ``anchor_*`` turn them into wall time. NULL = not
available. Column names are the metric keys of ``gpuscope.telemetry.metrics``.

Writers pass many rows to ``executemany`` in one transaction (the sampler flushes about once a
second). This module is stdlib only; ``gpuscope.telemetry.series.load_series`` builds numpy
arrays from :func:`read_rows`.
"""

from __future__ import annotations

import json
from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.store.db import Connection
    from typing import Any, Iterable, Sequence

# the tables: gpuscope.store.tables.SAMPLES

HOST_COLS = ("cpu", "mem_used", "mem_total", "swap_used", "swap_total")
GPU_COLS = ("util_gpu", "util_mem", "mem_used", "mem_total", "temperature", "power_w", "sm_clock")
PROC_COLS = ("state", "cpu", "rss", "uss", "threads", "gpu_mem", "sm_util")
GPU_PROC_COLS = ("used_memory_bytes", "sm_util")
_PROCS_COLS = ("ppid", "name", "cmdline_json", "create_time", "first_seen_ns", "last_seen_ns", "state",
               "alive", "via", "escaped", "orphaned", "cpu_seconds", "peak_rss_bytes",
               "peak_gpu_mem_bytes", "uss_bytes")
KIND_TABLES = {"host": ("sample_host", ("t_ns", *HOST_COLS, "cores")),
               "gpu": ("sample_gpu", ("device", "t_ns", *GPU_COLS)),
               "proc": ("sample_proc", ("pid", "t_ns", *PROC_COLS)),
               "gpu_proc": ("sample_gpu_proc", ("pid", "device", "t_ns", *GPU_PROC_COLS))}


def _insert(table: str, cols: Sequence[str]) -> str:
    return f"INSERT OR REPLACE INTO {table} (series, {', '.join(cols)}) VALUES (?{', ?' * len(cols)})"


def open_series(conn: Connection, run_id: str, *, interval_s: float, anchor_mono_ns: int,
                anchor_wall_ns: int, root_pid: int | None, info: dict[str, Any] | None = None) -> int:
    """The series key of ``run_id`` (created on first use)."""
    row = conn.execute("SELECT key FROM sample_series WHERE run_id=?", (run_id,)).fetchone()
    if row is not None:
        return int(row[0])
    cur = conn.execute(
        "INSERT INTO sample_series (run_id, interval_s, anchor_mono_ns, anchor_wall_ns, root_pid, info_json)"
        " VALUES (?,?,?,?,?,?)",
        (run_id, interval_s, anchor_mono_ns, anchor_wall_ns, root_pid, json.dumps(info or {})))
    assert cur.lastrowid is not None   # an INSERT's row
    return int(cur.lastrowid)


def _batch_rows(series: int, batches: Iterable[Any]) -> dict[str, list[tuple[Any, ...]]]:
    rows: dict[str, list[tuple[Any, ...]]] = {k: [] for k in KIND_TABLES}
    for b in batches:
        t = b.t_ns
        h = b.host
        if h is not None:
            rows["host"].append((series, t, *(getattr(h, c) for c in HOST_COLS),
                                 array("f", h.cores).tobytes() if h.cores else None))
        rows["gpu"].extend((series, d.index, t, *(getattr(d, c) for c in GPU_COLS)) for d in b.devices)
        rows["proc"].extend((series, p.pid, t, *(getattr(p, c) for c in PROC_COLS)) for p in b.processes)
        rows["gpu_proc"].extend((series, g.pid, g.device_index, t, g.used_memory_bytes, g.sm_util)
                                for g in b.gpu_processes)
    return rows


def write_batches(conn: Connection, series: int, batches: Sequence[Any],
                  summary: dict[int, dict[str, Any]] | None = None, notes: Sequence[str] = ()) -> int:
    """Write sample batches (objects shaped like ``telemetry.batch.SampleBatch``), the process
    summary and new notes in one transaction; returns the number of sample rows."""
    rows = _batch_rows(series, batches)
    n = 0
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        for kind, (table, cols) in KIND_TABLES.items():
            if rows[kind]:
                conn.executemany(_insert(table, cols), rows[kind])
                n += len(rows[kind])
        if summary:
            conn.executemany(_insert("sample_procs", ("pid", *_PROCS_COLS)),
                             [_procs_row(series, s) for s in summary.values()])
        if notes:
            old = json.loads(conn.execute("SELECT notes_json FROM sample_series WHERE key=?",
                                              (series,)).fetchone()[0])
            conn.execute("UPDATE sample_series SET notes_json=? WHERE key=?",
                         (json.dumps(old + [x for x in notes if x not in old]), series))
    return n


def _procs_row(series: int, s: dict[str, Any]) -> tuple[Any, ...]:
    d = dict(s, cmdline_json=json.dumps(s.get("cmdline") or []))
    return (series, s["pid"], *(d.get(c) for c in _PROCS_COLS))


def series_info(conn: Connection, run_id: str) -> dict[str, Any] | None:
    """The series row of a run (``key``, ``interval_s``, anchors, ``info``, ``notes``), or None."""
    r = conn.execute("SELECT * FROM sample_series WHERE run_id=?", (run_id,)).fetchone()
    if r is None:
        return None
    d = dict(zip(r.keys(), tuple(r))) if hasattr(r, "keys") else dict(
        zip(("key", "run_id", "interval_s", "anchor_mono_ns", "anchor_wall_ns", "root_pid",
             "info_json", "notes_json"), r))
    d["info"] = json.loads(d.pop("info_json") or "{}")
    d["notes"] = json.loads(d.pop("notes_json") or "[]")
    return d


def read_rows(conn: Connection, series: int, kind: str, since_t_ns: int | None = None) -> list[tuple]:
    """Rows of one kind (columns as in ``KIND_TABLES[kind][1]``), ordered by subject and time;
    with ``since_t_ns``, only rows after that time (ordered by time, for tailing)."""
    table, cols = KIND_TABLES[kind]
    sql = f"SELECT {', '.join(cols)} FROM {table} WHERE series=?"
    if since_t_ns is None:
        return [tuple(r) for r in conn.execute(sql, (series,))]
    return [tuple(r) for r in conn.execute(sql + " AND t_ns>? ORDER BY t_ns", (series, since_t_ns))]


def read_processes(conn: Connection, series: int) -> dict[int, dict[str, Any]]:
    """The per-process summary rows of a series, by pid."""
    out: dict[int, dict[str, Any]] = {}
    for r in conn.execute(f"SELECT pid, {', '.join(_PROCS_COLS)} FROM sample_procs WHERE series=?", (series,)):
        d = dict(zip(("pid", *_PROCS_COLS), tuple(r)))
        d["cmdline"] = json.loads(d.pop("cmdline_json") or "[]")
        d["alive"], d["orphaned"] = bool(d["alive"]), bool(d["orphaned"])
        out[d["pid"]] = d
    return out


def delete_run_samples(conn: Connection, run_id: str) -> None:
    """Remove a run's samples (for history deletion)."""
    info = series_info(conn, run_id)
    if info is None:
        return
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        for table in ("sample_host", "sample_gpu", "sample_proc", "sample_gpu_proc", "sample_procs"):
            conn.execute(f"DELETE FROM {table} WHERE series=?", (info["key"],))
        conn.execute("DELETE FROM sample_series WHERE key=?", (info["key"],))
