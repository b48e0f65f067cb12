"""Cheap readers of Linux ``/proc`` for the process-tree sampler.

One ``read()`` of ``/proc/<pid>/stat`` per process and tick gives everything the sampler needs
each tick (state, parent, process group, session, CPU ticks, threads, start time, RSS). psutil
reads two or three files per process for the same; at 64 processes x 10 Hz that difference is
the sampler's budget (docs/TELEMETRY.md has the figures). Costly reads (USS, cmdline, environ)
are separate functions, called rarely.
"""

from __future__ import annotations

import os
from typing import NamedTuple

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_O_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


class Stat(NamedTuple):
    """The fields of ``/proc/<pid>/stat`` the sampler uses."""

    name: str
    state: str
    ppid: int
    pgrp: int
    session: int
    cpu_ticks: int      # utime + stime, in CLK_TCK units
    threads: int
    start_ticks: int    # since boot, in CLK_TCK units: (pid, start_ticks) names a process uniquely
    rss_pages: int


def _read(path: str, size: int = 4096) -> bytes | None:
    try:
        fd = os.open(path, _O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            if len(chunk) < size and size <= 4096:
                break
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_stat(data: bytes) -> Stat | None:
    """Parse the text of ``/proc/<pid>/stat`` (the name may hold spaces and parentheses)."""
    rpar = data.rfind(b")")
    if rpar < 0:
        return None
    f = data[rpar + 2:].split(None, 22)   # the 22 fields we need; the rest stays unsplit
    try:
        return Stat(data[data.find(b"(") + 1:rpar].decode("utf-8", "replace"), f[0].decode(),
                    int(f[1]), int(f[2]), int(f[3]), int(f[11]) + int(f[12]), int(f[17]),
                    int(f[19]), int(f[21]))
    except (IndexError, ValueError):
        return None


def read_stat(pid: int) -> Stat | None:
    """The process's stat line, or None if it is gone."""
    data = _read(f"/proc/{pid}/stat", 1024)
    return parse_stat(data) if data else None


class StatReader:
    """Reads ``/proc/<pid>/stat`` through a descriptor kept open per process (``pread`` at 0
    regenerates the file), saving the open/close of each tick. The descriptor names the process
    it was opened for, so a reused pid cannot be read by mistake. At most ``max_fds`` are kept."""

    def __init__(self, max_fds: int = 256) -> None:
        self._fds: dict[int, int] = {}
        self.max_fds = max_fds

    def read_raw(self, pid: int) -> bytes | None:
        """The stat text, or None if the process is gone."""
        fd = self._fds.get(pid)
        if fd is None:
            if len(self._fds) >= self.max_fds:
                return _read(f"/proc/{pid}/stat", 1024)
            try:
                fd = self._fds[pid] = os.open(f"/proc/{pid}/stat", _O_RDONLY)
            except OSError:
                return None
        try:
            data = os.pread(fd, 1024, 0)
        except OSError:
            data = b""
        if not data:
            self.forget(pid)
            return None
        return data

    def forget(self, pid: int) -> None:
        fd = self._fds.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for pid in list(self._fds):
            self.forget(pid)


def list_pids() -> set[str]:
    """Names of the numeric entries of /proc (kept as strings: diffing them is cheap)."""
    try:
        return {d for d in os.listdir("/proc") if d.isdigit()}
    except OSError:
        return set()


def cmdline(pid: int) -> tuple[str, ...]:
    data = _read(f"/proc/{pid}/cmdline", 65536) or b""
    return tuple(a.decode("utf-8", "replace") for a in data.split(b"\0") if a)


def environ_has(pid: int, entry: bytes) -> bool:
    """Whether ``KEY=value`` is one of the process's initial environment entries."""
    data = _read(f"/proc/{pid}/environ", 65536)
    if not data:
        return False
    return data.startswith(entry + b"\0") or (b"\0" + entry + b"\0") in data or data == entry


def owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def uss_bytes(pid: int) -> int | None:
    """Unique set size: Private_Clean + Private_Dirty + Private_Hugetlb of smaps_rollup."""
    data = _read(f"/proc/{pid}/smaps_rollup", 65536)
    if not data:
        return None
    total = 0
    for line in data.split(b"\n"):
        if line.startswith(b"Private_"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total += int(parts[1]) * 1024
    return total


def boot_time() -> float:
    """Host boot time (seconds since the epoch), to turn start ticks into a create time."""
    data = _read("/proc/stat", 65536) or b""
    for line in data.split(b"\n"):
        if line.startswith(b"btime "):
            return float(line.split()[1])
    return 0.0
