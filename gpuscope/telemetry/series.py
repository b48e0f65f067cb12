"""Read a past run's samples from the store as numpy arrays (for plots and analysis)."""

from __future__ import annotations

import sqlite3

from typing import Any

import numpy as np

from gpuscope.store import samples


def _columns(rows: list[tuple], names: tuple[str, ...], skip: int) -> dict[str, np.ndarray]:
    """Column arrays; numbers become float64 with NaN for NULL (t_ns stays int64)."""
    out: dict[str, np.ndarray] = {}
    for j, name in enumerate(names[skip:], start=skip):
        col = [r[j] for r in rows]
        if name == "t_ns":
            out[name] = np.asarray(col, dtype=np.int64)
        elif name == "state":
            out[name] = np.asarray([c or "" for c in col], dtype="U1")
        elif name != "cores":
            out[name] = np.asarray([np.nan if c is None else c for c in col], dtype=np.float64)
    return out


def _grouped(rows: list[tuple], names: tuple[str, ...], nkeys: int) -> dict[Any, dict[str, np.ndarray]]:
    groups: dict[Any, list[tuple]] = {}
    for r in rows:
        groups.setdefault(r[0] if nkeys == 1 else r[:nkeys], []).append(r)
    return {k: _columns(sorted(v, key=lambda r: r[nkeys]), names, nkeys) for k, v in groups.items()}


def load_series(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """All samples of a run, or None if it has none.

    Returns ``{"run_id", "interval_s", "anchor_mono_ns", "anchor_wall_ns", "notes", "info",
    "host": {"t_ns", "cpu", "mem_used", ..., "cores": 2-D (n, ncores)},
    "gpus": {device: {"t_ns", "util_gpu", ...}}, "processes": {pid: {"t_ns", "cpu", "rss", ...,
    "state"}}, "gpu_processes": {(pid, device): {"t_ns", "used_memory_bytes", "sm_util"}},
    "process_info": {pid: summary dict}}``. Values are float64 with NaN where not available.
    """
    info = samples.series_info(conn, run_id)
    if info is None:
        return None
    key = info["key"]
    names = {k: cols for k, (_, cols) in samples.KIND_TABLES.items()}
    host_rows = sorted(samples.read_rows(conn, key, "host"))
    host = _columns(host_rows, names["host"], 0)
    cores = [np.frombuffer(r[-1], dtype=np.float32) if r[-1] else None for r in host_rows]
    width = max((len(c) for c in cores if c is not None), default=0)
    grid = np.full((len(cores), width), np.nan)
    for i, c in enumerate(cores):
        if c is not None:
            grid[i, :len(c)] = c
    host["cores"] = grid
    return {
        "run_id": run_id, "interval_s": info["interval_s"], "anchor_mono_ns": info["anchor_mono_ns"],
        "anchor_wall_ns": info["anchor_wall_ns"], "notes": info["notes"], "info": info["info"],
        "host": host,
        "gpus": _grouped(samples.read_rows(conn, key, "gpu"), names["gpu"], 1),
        "processes": _grouped(samples.read_rows(conn, key, "proc"), names["proc"], 1),
        "gpu_processes": _grouped(samples.read_rows(conn, key, "gpu_proc"), names["gpu_proc"], 2),
        "process_info": samples.read_processes(conn, key),
    }
