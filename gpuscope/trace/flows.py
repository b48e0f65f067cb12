"""Flows: a pool job's submission in the parent to each of its tasks in the workers that ran them.

gpuscope's injection writes a ``J`` line in the process that submits a ``multiprocessing.pool`` job
(``apply_async``, ``map_async``, ``imap``…: when its result object is made, with the job's
number) and a ``T`` line in the worker that takes one of its tasks (the job's number and the
task's). Job numbers count per submitting process, so a task is matched to the job of the same
number in its worker's parent: the process whose ``C`` line started the worker (a forkserver
child's parent is the server, not the process that asked for it), else the worker's ``ppid``.

Times are put on a Timeline's base the way its event-log ranges are (``coverage._offset``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuscope.trace import timeline as T


@dataclass
class Flows:
    """One row per task that was matched to its job's submission (equal-length numpy columns)."""

    src_pid: np.ndarray
    src_tid: np.ndarray
    src_ns: np.ndarray      # when the job was submitted (timeline base)
    dst_pid: np.ndarray
    dst_tid: np.ndarray
    dst_ns: np.ndarray      # when the worker took the task (its task range starts right after)
    job: np.ndarray
    task: np.ndarray

    def __len__(self) -> int:
        return int(len(self.src_ns))

    @classmethod
    def empty(cls) -> "Flows":
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z, z, z, z)


def pool_flows(logs: list, tl: T.Timeline) -> Flows:
    """Flows of a run's event logs (``trace.events.read_run_events``) on ``tl``'s time base."""
    from gpuscope.trace.coverage import _offset, wall_minus_mono

    wall_mono = wall_minus_mono(logs)
    started_by = {pid: pe.pid for pe in logs for _, _, pid, _ in pe.children}
    by_pid = {pe.pid: pe for pe in logs}
    jobs: dict[tuple[int, int], tuple[int, int]] = {}    # (pid, job) -> (t on tl, tid)
    for pe in logs:
        off = _offset(pe, tl, wall_mono) if pe.jobs else 0
        for t, tid, job in pe.jobs:
            jobs[(pe.pid, job)] = (t - off, tid)
    rows = []
    for pe in logs:
        if not pe.tasks:
            continue
        parent = started_by.get(pe.pid, pe.header.get("ppid"))
        if parent not in by_pid:
            continue
        off = _offset(pe, tl, wall_mono)
        for t, tid, job, i in pe.tasks:
            src = jobs.get((parent, job))
            if src is not None:
                rows.append((parent, src[1], src[0], pe.pid, tid, t - off, job, i))
    if not rows:
        return Flows.empty()
    a = np.array(rows, dtype=np.int64)
    a = a[np.argsort(a[:, 2], kind="stable")]
    return Flows(*(a[:, k] for k in range(8)))


def run_flows(run_dir: str | Path, tl: T.Timeline) -> Flows:
    """Flows of a run folder's event logs (none when it has no ``events/``)."""
    from gpuscope.trace.events import read_run_events

    events = Path(run_dir) / "events"
    if not events.is_dir():
        return Flows.empty()
    return pool_flows(read_run_events(Path(run_dir)), tl)
