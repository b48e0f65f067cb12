"""The run folder: one per run under the data directory, named by run id."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from gpuscope import paths

SPEC = "spec.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
EVENTS = "events"
INJECT_ERRORS = "inject-errors.log"
SUMMARY = "summary.json"
NSYS_BASENAME = "report"  # report.nsys-rep / report.qdstrm / report.sqlite


def new_run_id() -> str:
    """Sortable and unique: 20261130-143501-3f9a."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def create_run_dir(run_id: str) -> Path:
    path = paths.runs_dir() / run_id
    (path / EVENTS).mkdir(parents=True, exist_ok=False)
    return path


def boot_dir() -> str:
    """The folder put first on PYTHONPATH: holds gpuscope's sitecustomize."""
    here = Path(__file__).resolve().parent.parent / "inject" / "boot"
    return str(here)


def pythonpath_with_boot(existing: str | None) -> str:
    parts = [boot_dir()]
    if existing:
        parts.extend(p for p in existing.split(os.pathsep) if p and p != parts[0])
    return os.pathsep.join(parts)
