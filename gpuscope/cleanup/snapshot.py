"""A snapshot of the machine's processes for cleanup, read from /proc through
:mod:`gpuscope.processes` (the one process reader; no psutil).

Each process is a :class:`gpuscope.processes.ProcInfo` (identity = pid + create time; command
line, environment and owner read on first use); here are the table of all of them at one moment
and what only cleanup asks: user names, open /dev/nvidia* files and "last ran".
"""

from __future__ import annotations

import os
import pwd
import time
from typing import Iterator

from gpuscope.processes import ProcInfo, ancestors, read, snapshot

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
    def take(cls) -> "ProcTable":
        return cls(snapshot(), time.monotonic())

    def get(self, pid: int) -> ProcInfo | None:
        return self.procs.get(pid)

    def __iter__(self) -> Iterator[ProcInfo]:
        return iter(self.procs.values())

    def children(self, pid: int) -> list[ProcInfo]:
        return [p for p in self.procs.values() if p.ppid == pid]


def last_ran_s_ago(pid: int) -> float | None:
    """Seconds since any thread of ``pid`` last ran on a CPU (from /proc/<pid>/task/*/sched).

    ``se.exec_start`` is the scheduler clock in ms, which on Linux tracks CLOCK_MONOTONIC.
    Returns None where the kernel does not expose it.
    """
    latest = None
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids[:256]:
        try:
            with open(f"/proc/{pid}/task/{tid}/sched", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("se.exec_start"):
                        value = float(line.split(":", 1)[1])
                        latest = value if latest is None else max(latest, value)
                        break
        except (OSError, ValueError):
            continue
    if latest is None:
        return None
    return max(0.0, time.clock_gettime(time.CLOCK_MONOTONIC) - latest / 1000.0)


def nvidia_files_open(pid: int) -> bool | None:
    """Whether ``pid`` has a /dev/nvidia* device open (None when its fds cannot be read)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia"):
                return True
        except OSError:
            continue
    return False
