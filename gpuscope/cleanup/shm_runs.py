"""Which run made a /dev/shm segment: the ``D`` lines of its event logs (inject/shmwatch.py).

Cleanup attributes a leftover it lists to the finished run whose logs say one of its processes
created it and none unlinked it (:func:`gpuscope.procs.shm.left_by`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gpuscope.procs.shm import ShmMade, left_by

if TYPE_CHECKING:
    from gpuscope.store.db import Connection
    from gpuscope.procs.shm import ShmSegment

SLACK_NS = 2_000_000_000     # a segment's mtime vs the run's window: clocks and ftruncate after start


def attribute(conn: Connection, segments: Iterable[ShmSegment]) -> dict[str, tuple[str, ShmMade]]:
    """name -> (run id, what its logs say) for the segments a stored run made: the runs whose
    time window holds the segment's last change are read (usually one)."""
    from gpuscope.trace.events import read_run_events

    segs = list(segments)
    if not segs:
        return {}
    rows = conn.execute("SELECT id, run_dir, started_ns, ended_ns FROM runs WHERE started_ns IS NOT NULL "
                        "ORDER BY started_ns DESC LIMIT 200").fetchall()
    out: dict[str, tuple[str, ShmMade]] = {}
    for row in rows:
        start, end = int(row["started_ns"]), row["ended_ns"]
        wanted = {s.name for s in segs if s.name not in out and start - SLACK_NS <= s.mtime * 1e9
                  and (end is None or s.mtime * 1e9 <= int(end) + SLACK_NS)}
        if not wanted or not row["run_dir"] or not os.path.isdir(row["run_dir"]):
            continue
        for made in left_by(read_run_events(row["run_dir"])):
            if made.name in wanted:
                out[made.name] = (str(row["id"]), made)
    return out
