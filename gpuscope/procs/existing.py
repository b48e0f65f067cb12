"""The processes that existed before a run: later scans need not read them.

Why: finding a run's processes means judging every process of the host (one
``/proc/<pid>/stat`` each; docs/PROCS.md has the cost), and ``gpuscope run`` does it at the
sampler's first tick and when the program ended. None of the processes that existed before the
program started can be the run's (a member is the program, or was started after it), so those
scans read only the pids that are not in the list. That holds while each listed pid still names
the process that had it: the kernel hands pids out in a cycle and gives a freed one again only
after every other free pid of ``pid_max`` was handed out, so while fewer than half of ``pid_max``
processes and threads were created since the list (``/proc/stat``'s ``processes`` counter), no
listed pid can have been reused. Past that, or when the counter cannot be read, nothing is skipped.
"""

from __future__ import annotations

from gpuscope.procs.files import forks_since_boot, list_pids, pid_max


class Existing:
    """The pids of /proc just before a run's program started; :meth:`skippable` says which later
    scans may skip (see the module's docstring)."""

    __slots__ = ("pids", "_forks", "_budget")

    def __init__(self, program: int | None = None) -> None:
        """``program``: the pid of a program forked but not yet exec'd: left out of the list.
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
