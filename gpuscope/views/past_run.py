"""Everything needed to show a past run again, read on a worker thread (Qt-free)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpuscope import rundir as layout

if TYPE_CHECKING:
    import sqlite3

TAIL_BYTES = 4 << 20


@dataclass
class PastRun:
    """A finished run as its Run tab shows it: series, identities, output, findings, stacks."""

    run_id: str
    run_dir: Path
    series: dict[str, Any] | None              # gpuscope.telemetry.series.load_series, or None
    identities: dict[int, Any] = field(default_factory=dict)
    output: list[tuple[str, bytes]] = field(default_factory=list)
    truncated: dict[str, int] = field(default_factory=dict)   # stream -> bytes not loaded
    findings: list[Any] = field(default_factory=list)        # gpuscope.finding.Finding, as `gpuscope findings`
    stacks: tuple[int | None, list[Any]] | None = None         # the last stacks taken (taken_ns, processes)
    started_ns: int | None = None
    ray_store: list[dict[str, int]] = field(default_factory=list)   # a Ray run's object store samples
    rows: tuple[list[Any], list[int]] = field(default_factory=lambda: ([], []))   # record's rows, pids left running


def _tail(path: Path, limit: int) -> tuple[bytes, int]:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size > limit:
                fh.seek(size - limit)
                data = fh.read()
                return data[data.find(b"\n") + 1:], size - limit
            return fh.read(), 0
    except OSError:
        return b"", 0


def load_past_run(run_id: str, run_dir: str | os.PathLike[str], started_ns: int | None = None) -> PastRun:
    """Stored samples, process identities, the tail of each output log, the findings (the same list
    as ``gpuscope findings RUN``) and the last stacks taken of one run."""
    from gpuscope.views.procroles import RoleReader
    from gpuscope.findings.engine import analyse_run
    from gpuscope.findings.stacks import load_latest
    from gpuscope.store import db
    from gpuscope.telemetry.series import load_series

    conn = db.connect()
    try:
        series = load_series(cast("sqlite3.Connection", conn), run_id)   # the store's wrapper answers alike
    finally:
        conn.close()
    folder = Path(run_dir)
    from gpuscope.telemetry.ray_store import read_ray_store

    past = PastRun(run_id, folder, series, RoleReader(folder).lookup(), started_ns=started_ns,
                   ray_store=read_ray_store(folder))
    for stream, name in (("stdout", layout.STDOUT), ("stderr", layout.STDERR)):
        data, cut = _tail(folder / name, TAIL_BYTES)
        if data:
            past.output.append((stream, data))
        if cut:
            past.truncated[stream] = cut
    if folder.is_dir():
        from gpuscope.views.live_model import read_process_rows

        past.rows = read_process_rows(folder)
        past.findings = analyse_run(folder)
        taken, procs = load_latest(folder)
        past.stacks = (taken, procs) if procs else None
    return past
