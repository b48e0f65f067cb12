"""The run folder: one per run under the data directory, named by run id.

The folder is reserved and made with strings (no ``pathlib``): ``gpuscope run`` does it before it
starts the program; :func:`create_run_dir` gives the ``Path``.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from gpuscope import paths

if TYPE_CHECKING:
    from pathlib import Path

SPEC = "spec.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
EVENTS = "events"
INJECT_ERRORS = "inject-errors.log"
SUMMARY = "summary.json"
RAY_STORE = "ray_store.jsonl"   # the Ray object store's samples (telemetry/ray_store.py)
NSYS_BASENAME = "report"  # report.nsys-rep / report.qdstrm / report.sqlite


ID_ATTEMPTS = 50


def _candidate_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(4).hex()  # as secrets.token_hex(4)


def new_run_id(tighten: bool = True) -> str:
    """A sortable id that no other run has: 20261130-143501-3f9a01bc.

    The id is reserved by creating its folder (``mkdir`` is atomic), so runs started in the same
    second, in any number of processes, never share one; a taken id is drawn again.
    :func:`create_run_dir` then fills the reserved folder.
    """
    return reserve_run_dir(tighten)[0]


def reserve_run_dir(tighten: bool = True) -> tuple[str, str]:
    """(id, folder) of a new, private (0700) run folder (``tighten``: see ``paths.data_dir``)."""
    root = paths.runs_root(tighten)
    for _ in range(ID_ATTEMPTS):
        run_id = _candidate_id()
        try:
            os.mkdir(os.path.join(root, run_id), 0o700)
        except FileExistsError:
            continue
        return run_id, os.path.join(root, run_id)
    raise RuntimeError(f"no free run id under {root} after {ID_ATTEMPTS} tries")


def create_run_folder(run_id: str, tighten: bool = True) -> str:
    """The run's folder (reserved by :func:`new_run_id`, or created here) with its events folder."""
    path = os.path.join(paths.runs_root(tighten), run_id)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    os.mkdir(os.path.join(path, EVENTS), 0o700)
    return path


def create_run_dir(run_id: str, tighten: bool = True) -> Path:
    """:func:`create_run_folder` as a ``Path``."""
    return paths.as_path(create_run_folder(run_id, tighten))


def event_logs(run_dir: str | os.PathLike[str]) -> list[str]:
    """The run's event logs (``events/*.log``, one per logged process), sorted by name; none when
    there is no events folder. Strings, as the run path reads them (no ``pathlib``)."""
    return logs_in(os.path.join(run_dir, EVENTS))


def find_export(run_dir: str | os.PathLike[str]) -> str | None:
    """The run folder's nsys export: ``report.sqlite``, ``report.nsys-rep``, else the first of each
    kind by name; None when it has none."""
    folder = os.fspath(run_dir)
    for name in (NSYS_BASENAME + ".sqlite", NSYS_BASENAME + ".nsys-rep"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    found = [n for n in names if n.endswith(".sqlite")] + [n for n in names if n.endswith(".nsys-rep")]
    return os.path.join(folder, found[0]) if found else None


def logs_in(folder: str | os.PathLike[str]) -> list[str]:
    """The ``*.log`` files of ``folder``, sorted by name ([] when it cannot be listed)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, name) for name in sorted(names) if name.endswith(".log")]


def boot_dir() -> str:
    """The folder put first on PYTHONPATH: holds gpuscope's sitecustomize."""
    return os.path.join(os.path.dirname(os.path.realpath(__file__)), "inject", "boot")


def pythonpath_with_boot(existing: str | None) -> str:
    parts = [boot_dir()]
    if existing:
        parts.extend(p for p in existing.split(os.pathsep) if p and p != parts[0])
    return os.pathsep.join(parts)
