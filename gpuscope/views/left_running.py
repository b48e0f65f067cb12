"""The processes a finished run left running, followed after the run (Qt-free).

The status line of a run that ended by itself says "N process(es) still running (see Cleanup)";
once the Cleanup tab (or anything else) has ended them, the line must say so. Each pid is followed
with the start time it had when the run ended, so a reused pid never counts as the leftover.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpuscope.procs import read as processes
from gpuscope.views.run_status import describe_result


@dataclass
class LeftRunning:
    """The processes a finished run left running, checked again until they end."""

    result: Any                     # gpuscope.runs.supervisor.RunResult
    idents: dict[int, int]          # pid -> start ticks when the run ended
    alive: list[int]                # the pids still running at the last check
    line: str                       # the status line that says so

    @classmethod
    def of(cls, result: Any, line: str) -> "LeftRunning | None":
        """For a result with processes left running (None when it has none)."""
        idents = {}
        for pid in result.left_running:
            info = processes.read(pid)
            if info is not None and not info.is_zombie:
                idents[pid] = info.start_ticks
        if not result.left_running:
            return None
        return cls(result, idents, list(result.left_running), line)

    def still_running(self) -> list[int]:
        """The leftovers that still run now (a zombie, or a new process on the pid, does not)."""
        out = []
        for pid, start in self.idents.items():
            info = processes.read(pid)
            if info is not None and info.start_ticks == start and not info.is_zombie:
                out.append(pid)
        return out

    def update(self) -> str | None:
        """The run's status line again when the count changed since the last check, else None."""
        alive = self.still_running()
        if alive == self.alive:
            return None
        gone = len(self.result.left_running) - len(alive)
        self.alive = alive
        self.line = describe_result(replace(self.result, left_running=alive))
        self.line += ("; the process(es) it left running have ended" if not alive else
                      f"; {gone} of the process(es) it left running have ended")
        return self.line
