"""The identity of a process: its pid and its start time, which together never repeat."""

from __future__ import annotations

from typing import NamedTuple


class ProcKey(NamedTuple):
    """A process as every package names it.

    ``start`` is the kernel's start time in clock ticks since boot (field 22 of
    ``/proc/<pid>/stat``), readable from outside the process; a pid alone may be reused. (The
    event logs' file names carry the process's own monotonic start in ns instead; the reader
    maps a log to its key through the pid and the ``start_ticks`` its header records.)
    """

    pid: int
    start: int

    def __str__(self) -> str:
        return f"{self.pid}-{self.start}"

    @classmethod
    def parse(cls, text: str) -> ProcKey:
        """``"1234-5678"`` (as ``str`` writes it) back into a key; ValueError if it is not one."""
        pid, _, start = text.partition("-")
        return cls(int(pid), int(start))
