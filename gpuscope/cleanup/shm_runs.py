"""Which run made a /dev/shm segment: the ``D`` lines of its event logs (inject/shmwatch.py).

A segment or named semaphore is *left* by a run when one of its processes created it and none
unlinked it. The ``leaked-shm`` finding names those still in /dev/shm at the run's end; cleanup
attributes a leftover it lists to the finished run whose logs say they made it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscope.procs.shm import SHM_DIR

if TYPE_CHECKING:
    from gpuscope.store.db import Connection
    from gpuscope.procs.shm import ShmSegment
    from gpuscope.trace.events import ProcessEvents

SLACK_NS = 2_000_000_000     # a segment's mtime vs the run's window: clocks and ftruncate after start


@dataclass(frozen=True)
class ShmMade:
    """A segment (``kind`` "shm") or named semaphore ("sem") a process of a run created."""

    name: str            # the file name in /dev/shm
    kind: str
    size: int | None
    pid: int
    where: str           # the user's file:line that created it ("" when unknown)
    t_ns: int

    def describe(self) -> str:
        what = "shared memory segment" if self.kind == "shm" else "named semaphore"
        size = f" of {self.size} bytes" if self.size else ""
        at = f" at {self.where}" if self.where else ""
        return f"{what} /dev/shm/{self.name}{size}, created by pid {self.pid}{at}"


def left_by(events: Iterable[ProcessEvents]) -> list[ShmMade]:
    """What the run's processes created and none of them unlinked, in creation order (a
    segment may be unlinked by another process than its creator)."""
    lines = sorted(((t, pe.pid, info) for pe in events for t, info in getattr(pe, "shm", ())),
                   key=lambda item: item[0])
    made: dict[str, ShmMade] = {}
    for t, pid, info in lines:
        name = str(info.get("name") or "")
        if not name:
            continue
        if info.get("op") == "create":
            size = info.get("size")
            made[name] = ShmMade(name, str(info.get("kind") or "shm"), int(size) if size else None, pid,
                                 str(info.get("where") or ""), t)
        elif info.get("op") == "unlink":
            made.pop(name, None)
    return list(made.values())


def still_present(made: Iterable[ShmMade], shm_dir: str = SHM_DIR) -> list[ShmMade]:
    """Those of ``made`` whose file is still in ``shm_dir``."""
    return [m for m in made if os.path.isfile(os.path.join(shm_dir, m.name))]


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
