"""Find a run for the findings and stacks commands: by id (or unique prefix), the latest, or a pid."""

from __future__ import annotations

from pathlib import Path

from gpuscope.errors import UserError


def run_by_id(run_id: str) -> tuple[str, Path]:
    from gpuscope.store.lookup import find_run

    found, folder = find_run(run_id)
    return found, Path(folder)


def latest_run() -> tuple[str, Path]:
    from gpuscope.store.lookup import latest_run as newest

    run_id, folder = newest()
    return run_id, Path(folder)


def run_of_pid(pid: int) -> tuple[str, Path]:
    """The run a live process belongs to (GPUSCOPE_RUN_ID in its environment)."""
    from gpuscope.procs.membership import run_id_of

    try:
        run_id = run_id_of(pid)
    except LookupError:
        raise UserError(f"no process {pid} (or its environment is not readable)") from None
    if not run_id:
        raise UserError(f"process {pid} is not part of a gpuscope run")
    return run_by_id(run_id)


def resolve(target: str | None, latest: bool) -> tuple[str, Path]:
    """RUN_ID | PID | --latest."""
    if latest or target is None:
        if target is not None:
            raise UserError("give a run id or a pid, or --latest, not both")
        return latest_run()
    if target.isdigit() and len(target) < 8:
        return run_of_pid(int(target))
    return run_by_id(target)
