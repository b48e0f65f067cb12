"""Role, rank and start method of a run's processes, read live from their event logs (Qt-free).

The sampler knows pids and resources; the startup hook knows what each Python process *is*
(main, pool / executor / DataLoader worker, spawn child, torchrun worker and its rank). Each process writes
``events/<pid>-<start>.log`` (docs/EVENTS.md) whose ``H`` and ``I`` lines carry that identity,
read by the run's event-log reader (gpuscope.trace.events) at most every ``reread_s``. A
parent's ``child_exits`` (an ``I`` key: the status multiprocessing reaped for a child killed
before it could write its exit record, SIGKILL, SIGTERM) gives that child's status.
Processes of a tool that runs beside the program (Nsight Systems) are recognised by their OS name
(:func:`tool_group`): they write no log.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuscope.trace.process_row import display_name

if TYPE_CHECKING:
    from gpuscope.trace.events import RunEvents


# The processes Nsight Systems runs beside the program (OS names): drawn apart as one group.
NSYS_GROUP = "Nsight Systems"
NSYS_NAMES = ("nsys", "nsys-launcher", "nsys-tee", "QdstrmImporter")


def tool_group(name: str | None) -> str | None:
    """The tool a process belongs to by its OS name (``nsys --start-agent`` is named ``nsys`` too),
    or None for the user's own processes."""
    if not name:
        return None
    if name in NSYS_NAMES or name.startswith(("nsys-", "Qdstrm")):
        return NSYS_GROUP
    return None


@dataclass(frozen=True)
class Identity:
    """What a process is in its run: role, rank, start method, DataLoader worker id."""

    role: str
    rank: int | None
    start_method: str | None
    worker_id: int | None = None     # a DataLoader worker's id

    @property
    def label(self) -> str:
        """The role as shown: ``DataLoader worker #1`` (:func:`gpuscope.trace.process_row.display_name`)."""
        return display_name(self.role, self.worker_id)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Identity:
        """An identity from its fields as JSON data (a remote agent's ``roles``)."""
        return cls(str(d.get("role") or ""), d.get("rank"), d.get("start_method"), d.get("worker_id"))


class RoleReader:
    """``lookup()`` -> {pid: Identity} for the processes that have an event log so far;
    ``exits`` -> {pid: exit code} known so far (negative: the signal that ended it).
    ``read()`` -> both at once. Thread-safe: the window reads on a pool thread. The logs are read
    by the run's one reader (:class:`gpuscope.trace.events.RunEvents`: only what they gained),
    at most every ``reread_s``; ``events``: the run's reader when the caller has it."""

    def __init__(self, run_dir: str | os.PathLike[str], reread_s: float = 1.0,
                 events: RunEvents | None = None) -> None:
        from gpuscope.trace.events import RunEvents

        self.events = events if events is not None else RunEvents(run_dir)
        self.reread_s = reread_s
        self._read_at = -1e9
        self._known: dict[int, Identity] = {}
        self._exits: dict[int, int] = {}
        self._lock = threading.Lock()

    @property
    def exits(self) -> dict[int, int]:
        """Exit statuses: a process's own exit record wins over what its parent reaped."""
        with self._lock:
            self._refresh()
            return dict(self._exits)

    def read(self) -> tuple[dict[int, Identity], dict[int, int]]:
        """``(lookup(), exits)``, read together."""
        with self._lock:
            self._refresh()
            return dict(self._known), dict(self._exits)

    def lookup(self) -> dict[int, Identity]:
        with self._lock:
            self._refresh()
            return dict(self._known)

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._read_at < self.reread_s:
            return
        self._read_at = now
        self.events.refresh(ranges=False)
        known: dict[int, Identity] = {}
        own: dict[int, int] = {}
        reaped: dict[int, int] = {}
        # one entry per process: a process that exec'd Python again is its latest log (docs/PROCESS-ROWS.md)
        for pe in self.events.processes():
            worker = pe.info.get("worker_id")
            known[pe.pid] = Identity(pe.role, pe.rank, pe.start_method, worker if isinstance(worker, int) else None)
            if isinstance(pe.exit_code, int):
                own[pe.pid] = pe.exit_code
            for child, code in (pe.info.get("child_exits") or {}).items():
                try:
                    reaped[int(child)] = int(code)
                except (TypeError, ValueError):
                    continue
        self._known, self._exits = known, {**reaped, **own}
