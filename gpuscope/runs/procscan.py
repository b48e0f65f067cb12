"""The run's processes as the supervisor sees them: a thin user of :mod:`gpuscope.processes`.

Kept for the supervisor's calls (``run_processes``, ``read_stat``, ``alive``); the reader and
the membership rule live in :mod:`gpuscope.processes`.
"""

from __future__ import annotations

from gpuscope.processes import ProcInfo, RunScope, alive, all_pids, environ_has, read, run_members

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuscope.proclist import Existing

__all__ = ["ProcInfo", "alive", "all_pids", "has_run_tag", "read_stat", "run_processes"]

read_stat = read


def has_run_tag(pid: int, run_id: str) -> bool:
    """Whether the process's environment carries GPUSCOPE_RUN_ID=<run_id>."""
    return environ_has(pid, f"GPUSCOPE_RUN_ID={run_id}".encode())


def run_processes(session_id: int, run_id: str, exclude: set[int] | None = None,
                  existing: Existing | None = None) -> dict[int, ProcInfo]:
    """Live (non-zombie) processes of the run whose root leads session ``session_id``: the
    session's members, their descendants, and processes tagged with the run id. ``existing``: the
    processes listed before the program started, not read again while that is safe."""
    scope = RunScope.of(session_id, run_id)
    skip = existing.skippable() if existing is not None else ()
    return {pid: info for pid, (info, _) in run_members(scope, exclude=exclude or (), skip=skip).items()}
