"""A snapshot of the machine's processes for cleanup, read through :mod:`gpuscope.procs`
(the one process reader; no psutil).

Each process is a :class:`gpuscope.procs.read.ProcInfo` (identity = pid + create time; command
line, environment and owner read on first use); here are the table of all of them at one moment
and what only cleanup asks: user names, open /dev/nvidia* files and "last ran".
"""

from __future__ import annotations

import pwd
import time
from collections.abc import Iterator

from gpuscope.procs.read import ProcInfo, ancestors, last_ran_s_ago, nvidia_files_open, read, snapshot

__all__ = ["ProcInfo", "ProcTable", "ancestors", "last_ran_s_ago", "nvidia_files_open",
           "read_process", "user_name"]

read_process = read


def user_name(uid: int | None) -> str:
    if uid is None:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class ProcTable:
    """All processes at one moment (monotonic time ``at``), indexed by pid."""

    def __init__(self, procs: dict[int, ProcInfo], at: float) -> None:
        self.procs = procs
        self.at = at

    @classmethod
    def take(cls) -> ProcTable:
        return cls(snapshot(), time.monotonic())

    def get(self, pid: int) -> ProcInfo | None:
        return self.procs.get(pid)

    def __iter__(self) -> Iterator[ProcInfo]:
        return iter(self.procs.values())

    def children(self, pid: int) -> list[ProcInfo]:
        return [p for p in self.procs.values() if p.ppid == pid]
