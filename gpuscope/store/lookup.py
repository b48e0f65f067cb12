"""Find and open a run by its id (or a unique prefix of it) or its folder: the one way in.

The store is the index of runs (their ids and folders); the record itself is read from the run's
folder (:func:`gpuscope.runrecord.read_folder`). A folder the store does not list (copied from
another machine, a job's node folder) opens too.
"""

from __future__ import annotations

import os
from contextlib import closing
from typing import TYPE_CHECKING

from gpuscope import rundir as layout
from gpuscope.errors import UserError
from gpuscope.runrecord.folder import read_folder, read_json

if TYPE_CHECKING:
    from gpuscope.runrecord.model import RunRecord
    from gpuscope.store.runs import RunRow


def open_run(ref: str | os.PathLike[str], store_path: str | os.PathLike[str] | None = None) -> RunRecord:
    """The record of a run, by its folder or its id (or a unique prefix of it, as the store knows
    it); raises :class:`UserError` when there is no such run."""
    folder, row = _locate(ref, store_path)
    return read_folder(folder, row)


def find_run(ref: str | os.PathLike[str], store_path: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """(run id, folder) of a run given by its folder or its id (or a unique prefix), without
    reading its record; raises :class:`UserError` when there is no such run."""
    folder, row = _locate(ref, store_path)
    if row is not None:
        return row.id, folder
    spec = read_json(os.path.join(folder, layout.SPEC)) or {}
    return str(spec.get("run_id") or os.path.basename(os.path.normpath(folder))), folder


def latest_run(store_path: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """(run id, folder) of the newest run the store lists; :class:`UserError` when there is none."""
    from gpuscope.store import db, runs

    with closing(db.connect(store_path)) as conn:
        rows = runs.list_runs(conn, limit=1)
    if not rows:
        raise UserError("no runs in the store yet (start one with `gpuscope run SCRIPT`)")
    return rows[0].id, rows[0].run_dir


def _locate(ref: str | os.PathLike[str], store_path: str | os.PathLike[str] | None) -> tuple[str, RunRow | None]:
    """The run's folder and its store row (None: the store does not list it)."""
    text = os.fspath(ref)
    if os.path.isdir(text):
        return text, _row_for_folder(text, store_path)
    row = _row(text, store_path)
    if row is not None:
        return row.run_dir, row
    from gpuscope import paths

    folder = os.path.join(paths.runs_root(), text)
    if text and os.sep not in text and os.path.isfile(os.path.join(folder, layout.SPEC)):
        return folder, None
    raise UserError(f"no run '{text}' in the store (see `gpuscope history`)")


def _row(run_id: str, store_path: str | os.PathLike[str] | None) -> RunRow | None:
    from gpuscope.store import db, runs

    with closing(db.connect(store_path)) as conn:
        return runs.get_run(conn, run_id)


def _row_for_folder(folder: str, store_path: str | os.PathLike[str] | None) -> RunRow | None:
    """The store's row of the run in ``folder``, when the store lists it (none: a copied folder)."""
    spec = read_json(os.path.join(folder, layout.SPEC)) or {}
    run_id = str(spec.get("run_id") or os.path.basename(os.path.normpath(folder)))
    try:
        row = _row(run_id, store_path)
    except Exception:  # noqa: BLE001 - a folder opens without a store (another machine's, a job's copy)
        return None
    if row is None or os.path.realpath(row.run_dir) != os.path.realpath(folder):
        return None
    return row


