"""The sampler's cheap ``/proc`` reads: stat through descriptors kept open, and USS.

One ``pread`` of ``/proc/<pid>/stat`` per member and tick gives everything the sampler needs
each tick (state, parent, process group, session, CPU ticks, threads, start time, RSS); it is
parsed by :func:`gpuscope.processes.parse_stat`, the one stat parser. psutil reads two or three
files per process for the same; at 64 processes x 10 Hz that difference is the sampler's budget
(docs/TELEMETRY.md has the figures). USS is costly and read rarely.
"""

from __future__ import annotations

import os

from gpuscope.proclist import O_RDONLY as _O_RDONLY
from gpuscope.proclist import list_pids, read_bytes

__all__ = ["ProcFile", "StatReader", "list_pids", "last_pid", "uss_bytes"]


class ProcFile:
    """One ``/proc`` file read each tick through a descriptor kept open (``pread`` at offset 0
    regenerates it): no open/close per read. Reopened once if a read fails."""

    def __init__(self, path: str, size: int = 65536) -> None:
        self.path, self.size = path, size
        self._fd = -1

    def read(self) -> bytes | None:
        for _attempt in (0, 1):
            if self._fd < 0:
                try:
                    self._fd = os.open(self.path, _O_RDONLY)
                except OSError:
                    return None
            try:
                data = os.pread(self._fd, self.size, 0)
            except OSError:
                data = b""
            if data:
                return data
            self.close()
        return None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def last_pid(loadavg: ProcFile) -> int | None:
    """The last process id the kernel handed out (the 5th field of ``/proc/loadavg``): while it
    stays the same, no process was created, so ``/proc`` need not be listed again."""
    data = loadavg.read()
    try:
        return int(data.split()[4]) if data else None
    except (IndexError, ValueError):
        return None


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
                return read_bytes(f"/proc/{pid}/stat", 1024)
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


def uss_bytes(pid: int) -> int | None:
    """Unique set size: Private_Clean + Private_Dirty + Private_Hugetlb of smaps_rollup."""
    data = read_bytes(f"/proc/{pid}/smaps_rollup", 65536)
    if not data:
        return None
    total = 0
    for line in data.split(b"\n"):
        if line.startswith(b"Private_"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total += int(parts[1]) * 1024
    return total
