"""The run's processes as the supervisor sees them: a thin user of :mod:`gpuscope.processes`.

Kept for the supervisor's calls (``run_processes``, ``read_stat``, ``alive``); the reader and
the membership rule live in :mod:`gpuscope.processes`.
"""

from __future__ import annotations

from gpuscope.processes import ProcInfo, RunScope, alive, all_pids, environ_has, read, run_members

__all__ = ["ProcInfo", "alive", "all_pids", "has_run_tag", "read_stat", "run_processes"]

read_stat = read


def has_run_tag(pid: int, run_id: str) -> bool:
    """Whether the process's environment carries GPUSCOPE_RUN_ID=<run_id>."""
    return environ_has(pid, f"GPUSCOPE_RUN_ID={run_id}".encode())


def run_processes(session_id: int, run_id: str, exclude: set[int] | None = None) -> dict[int, ProcInfo]:
    """Live (non-zombie) processes of the run whose root leads session ``session_id``: the
    session's members, their descendants, and processes tagged with the run id."""
    scope = RunScope.of(session_id, run_id)
    return {pid: info for pid, (info, _) in run_members(scope, exclude=exclude or ()).items()}
