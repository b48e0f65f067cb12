"""The host's process ids as ``/proc`` lists them, the one reader of ``/proc`` files
(:func:`read_bytes`), and the processes that existed before a run.

``os`` only: ``gpuscope run`` notes :class:`Existing` just before it starts the program, when
nothing else is imported yet (:mod:`gpuscope.runs.early`). :mod:`gpuscope.processes` reads the
processes themselves and re-exports :func:`list_pids` and :func:`read_bytes`.

Why :class:`Existing`: finding a run's processes means judging every process of the host (one
``/proc/<pid>/stat`` each: 45 us on a 2-core VM, so 4-5 ms for 85 processes and tens of ms on a
workstation with a thousand), and ``gpuscope run`` does it at the sampler's first tick and when
the program ended. None of the processes that existed before the program started can be the
run's (a member is the program, or was started after it: docs/RUN-ENGINE.md), so those scans
read only the pids that are not in the list. That holds while each listed pid still names the
process that had it: the kernel hands pids out in a cycle and gives a freed one again only after
every other free pid of ``pid_max`` was handed out, so while fewer than half of ``pid_max``
processes and threads were created since the list (``/proc/stat``'s ``processes`` counter), no
listed pid can have been reused. Past that, or when the counter cannot be read, nothing is skipped.
"""

# Loaded before `gpuscope run` starts its program: no `from __future__ import annotations`, which
# imports __future__ (~0.5 ms there); annotations naming what only type checkers import are strings.

import os

O_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)   # every /proc read: close-on-exec


def list_pids() -> set[str]:
    """Names of the numeric entries of /proc (kept as strings: diffing them is cheap)."""
    try:
        return {d for d in os.listdir("/proc") if d.isdigit()}
    except OSError:
        return set()


def read_bytes(path: str, size: int = 4096) -> bytes | None:
    """The whole content of a /proc file, or None when it cannot be read (gone, not permitted)."""
    try:
        fd = os.open(path, O_RDONLY)
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


def forks_since_boot() -> int | None:
    """How many processes and threads the host created since it booted (``/proc/stat``'s
    ``processes``), or None where it cannot be read."""
    data = read_bytes("/proc/stat", 65536) or b""
    at = data.find(b"\nprocesses ")
    if at < 0:
        return None
    try:
        return int(data[at + 11:data.index(b"\n", at + 11)])
    except ValueError:
        return None


def pid_max() -> int:
    """The kernel's ``pid_max`` (32768 where it cannot be read: the smallest usual value)."""
    try:
        return int((read_bytes("/proc/sys/kernel/pid_max", 64) or b"").strip() or 32768)
    except ValueError:
        return 32768


class Existing:
    """The pids of /proc just before a run's program started; :meth:`skippable` says which later
    scans may skip (see the module's docstring)."""

    __slots__ = ("pids", "_forks", "_budget")

    def __init__(self, program: int | None = None) -> None:
        """``program``: the pid of a program forked but not yet exec'd (:mod:`gpuscope.runs.early`
        lists while the child execs, off the path to the program's start): left out of the list.
        Nothing else of the run can exist until that program's interpreter has started."""
        self._forks = forks_since_boot()     # read first: a process created meanwhile counts
        pids = list_pids()
        if program is not None:
            pids.discard(str(program))
        self.pids = frozenset(pids)
        self._budget = pid_max() // 2

    def skippable(self) -> frozenset[str]:
        """The listed pids, while none of them can have been reused; else none."""
        if self._forks is None:
            return frozenset()
        now = forks_since_boot()
        if now is None or now - self._forks >= self._budget:
            return frozenset()
        return self.pids
