"""Read a run's record from its folder (:func:`read_folder`; by id: ``gpuscope.store.lookup.open_run``).

The run folder is the one source of truth (docs/STORE.md): ``spec.json`` (written when the run
starts: its spec, argv, versions) and ``summary.json`` (written once when it ends: the
:class:`RunRecord`'s JSON form). The store's ``runs`` row is an index derived from them (status
and times for listing, the folder's path); a run without a summary is either still running (the
store's row says so, and its gpuscope is alive) or its gpuscope died: its processes are then read
from the event logs. Folders written by older versions (a summary without ``started_ns``) open too.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from gpuscope import rundir as layout
from gpuscope.runrecord.model import RunRecord
from gpuscope.status import ExitStatus, RunStatus

if TYPE_CHECKING:
    from gpuscope.store.runs import RunRow

NO_SUMMARY = "no summary.json: gpuscope stopped before the run ended"


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object from ``path``; None when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_folder(folder: str | os.PathLike[str], row: RunRow | None = None) -> RunRecord:
    """The record of the run in ``folder``; ``row``: its store row (the status of a run that has
    no summary yet, and the start time of a summary that did not keep it)."""
    folder = os.fspath(folder)
    meta = read_json(os.path.join(folder, layout.SPEC)) or {}
    spec: dict[str, Any] = meta["spec"] if isinstance(meta.get("spec"), dict) else {}
    versions: dict[str, Any] = meta["versions"] if isinstance(meta.get("versions"), dict) else {}
    run_id = str(meta.get("run_id") or (row.id if row is not None else os.path.basename(os.path.normpath(folder))))
    started = (row.started_ns if row is not None else None) or _started_from_files(folder)
    summary = read_json(os.path.join(folder, layout.SUMMARY))
    if summary is not None:
        record = RunRecord.from_json(summary, folder, started, spec, versions)
        record.run_id = record.run_id or run_id
        return record
    return _unfinished(folder, run_id, started, row, spec, versions)


def _started_from_files(folder: str) -> int:
    """A run's start as its folder shows it (spec.json is written as the program starts)."""
    for name in (layout.SPEC, ""):
        try:
            return int(os.stat(os.path.join(folder, name)).st_mtime * 1e9)
        except OSError:
            continue
    return 0


def _unfinished(folder: str, run_id: str, started: int, row: RunRow | None, spec: dict[str, Any],
                versions: dict[str, Any]) -> RunRecord:
    """A run without its summary: still running (its store row says so), or its gpuscope died."""
    status = RunStatus.parse(row.status) if row is not None else RunStatus.ERROR
    error = row.error if row is not None else None
    if status is not RunStatus.RUNNING and error is None:
        error = NO_SUMMARY
    record = RunRecord(run_id=run_id, run_folder=folder, status=status,
                       exit=ExitStatus(row.exit_code if row else None, row.signal if row else None),
                       started_ns=started, ended_ns=(row.ended_ns or 0) if row is not None else 0,
                       error=error, spec=spec, versions=versions)
    record.processes = rows_from_events(folder)
    return record


def rows_from_events(folder: str) -> list[Any]:
    """The process rows of a run that has no summary, from its event logs (none if unreadable)."""
    if not os.path.isdir(os.path.join(folder, layout.EVENTS)):
        return []
    try:
        from gpuscope.trace.process_rows import build_rows

        return build_rows(folder)
    except Exception:  # noqa: BLE001 - a half-written log must not stop the run from opening
        return []
