"""The sampler's cheap ``/proc`` reads: stat through descriptors kept open, and USS.

One ``pread`` of ``/proc/<pid>/stat`` per member and tick gives everything the sampler needs
each tick (state, parent, process group, session, CPU ticks, threads, start time, RSS); it is
parsed by :func:`gpuscope.processes.parse_stat`, the one stat parser. psutil reads two or three
files per process for the same; at 64 processes x 10 Hz that difference is the sampler's budget
(docs/TELEMETRY.md has the figures). USS is costly and read rarely.
"""

from __future__ import annotations

import os

from gpuscope.processes import list_pids, read_bytes

__all__ = ["StatReader", "list_pids", "uss_bytes"]

_O_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


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
