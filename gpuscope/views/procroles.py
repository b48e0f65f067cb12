"""Role, rank and start method of a run's processes, read live from their event logs (Qt-free).

The sampler knows pids and resources; the startup hook knows what each Python process *is*
(main, pool / executor / DataLoader worker, spawn child, torchrun worker and its rank). Each process writes
``events/<pid>-<start>.log`` (docs/EVENTS.md) whose ``H`` and ``I`` lines carry that identity.
Only those two tags and the exit record (``X``: the process's exit status) are parsed here, and
each file is re-read at most every ``reread_s``. A parent's ``child_exits`` (an ``I`` key: the
status multiprocessing reaped for a child killed before it could write its exit record, SIGKILL,
SIGTERM) gives that child's status.
Processes of a tool that runs beside the program (Nsight Systems) are recognised by their OS name
(:func:`tool_group`): they write no log.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gpuscope.trace.process_row import display_name


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
    role: str
    rank: int | None
    start_method: str | None
    worker_id: int | None = None     # a DataLoader worker's id

    @property
    def label(self) -> str:
        """The role as shown: ``DataLoader worker #1`` (:func:`gpuscope.trace.process_row.display_name`)."""
        return display_name(self.role, self.worker_id)


def _parse(path: Path) -> tuple[int, Identity, int | None, dict] | None:
    """(pid, identity, its own exit code or None, the exit codes of children it reaped)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return None
    info: dict = {}
    pid = None
    code = None
    for raw in data.split(b"\n"):
        tag = raw[:2]
        try:
            if tag == b"H\t":
                header = json.loads(raw[2:])
                pid = int(header["pid"])
                info.update(header)
            elif tag == b"I\t":
                info.update(json.loads(raw.split(b"\t", 2)[2]))
            elif tag == b"X\t":
                value = json.loads(raw.split(b"\t", 2)[2]).get("exit_code")
                code = int(value) if isinstance(value, int) else code
        except (ValueError, KeyError, IndexError):
            continue  # a line still being written, or damaged: the next read gets it
    if pid is None:
        return None
    rank, worker = info.get("rank"), info.get("worker_id")
    children = info.get("child_exits")
    return pid, Identity(str(info.get("role") or "unknown"), int(rank) if rank is not None else None,
                         info.get("start_method"), worker if isinstance(worker, int) else None), \
        code, children if isinstance(children, dict) else {}


def _start_of(name: str) -> int:
    try:
        return int(name[:-4].rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


class RoleReader:
    """``lookup()`` -> {pid: Identity} for the processes that have an event log so far;
    ``exits`` -> {pid: exit code} known so far (negative: the signal that ended it).
    ``read()`` -> both at once. Thread-safe: the window reads on a pool thread (a pool worker's log
    holds a line per task, and up to 1 MB of each log is read again every ``reread_s``)."""

    def __init__(self, run_dir: str | os.PathLike[str], reread_s: float = 1.0) -> None:
        self.folder = Path(run_dir) / "events"
        self.reread_s = reread_s
        self._read_at: dict[str, float] = {}
        self._known: dict[int, Identity] = {}
        self._start: dict[int, int] = {}   # pid -> start of the log its identity came from
        self._own_exit: dict[int, int] = {}    # pid -> its exit record's code
        self._reaped: dict[int, int] = {}      # child pid -> the code its parent reaped
        self._lock = threading.Lock()

    @property
    def exits(self) -> dict[int, int]:
        """Exit statuses: a process's own exit record wins over what its parent reaped."""
        with self._lock:
            return {**self._reaped, **self._own_exit}

    def read(self) -> tuple[dict[int, Identity], dict[int, int]]:
        """``(lookup(), exits)``, read together."""
        with self._lock:
            return self._lookup(), {**self._reaped, **self._own_exit}

    def lookup(self) -> dict[int, Identity]:
        with self._lock:
            return self._lookup()

    def _lookup(self) -> dict[int, Identity]:
        now = time.monotonic()
        try:
            names = [n for n in os.listdir(self.folder) if n.endswith(".log")]
        except OSError:
            return dict(self._known)
        for name in names:
            if now - self._read_at.get(name, -1e9) < self.reread_s:
                continue
            self._read_at[name] = now
            parsed = _parse(self.folder / name)
            if parsed is None:
                continue
            # "<pid>-<start>.log": a process that exec'd Python again has a later log under its
            # pid; the latest log's identity wins (one process, one identity: docs/PROCESS-ROWS.md)
            pid, start = parsed[0], _start_of(name)
            if start >= self._start.get(pid, -1):
                self._known[pid] = parsed[1]
                self._start[pid] = start
                if parsed[2] is not None:
                    self._own_exit[pid] = parsed[2]
                else:
                    self._own_exit.pop(pid, None)
            for child, code in parsed[3].items():
                try:
                    self._reaped[int(child)] = int(code)
                except (TypeError, ValueError):
                    continue
        return dict(self._known)
