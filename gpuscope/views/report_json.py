"""The object ``gpuscope report --json`` prints: what to read (a report, an export, a run folder or
id, a job folder), the report read, and its JSON form (docs/NSYS-REPORTS.md). The CLI prints it;
a remote agent answers it in its own process (docs/REMOTE.md)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from gpuscope.errors import UserError

SUMMARY_KEYS = (("nvtx", "NVTX ranges"), ("kernel", "CUDA kernels"), ("cuda_api", "CUDA API"),
                ("memop", "CUDA memcpy/memset"), ("osrt", "OS runtime"))

__all__ = ["SUMMARY_KEYS", "load", "report_object", "resolve", "to_json"]


def _run_dir(run_id: str) -> Path:
    from gpuscope.store.lookup import find_run

    return Path(find_run(run_id)[1])


def resolve(run: str | None, path: str | None) -> tuple[Path, Path | None]:
    """(what to load, run folder for coverage or None) of ``--run RUN`` and/or ``PATH``."""
    if run:
        run_dir = _run_dir(run)
        return (Path(path) if path else run_dir), run_dir
    if not path:
        raise UserError("give a .nsys-rep, a .sqlite export, a run folder, or --run RUN_ID")
    p = Path(path)
    if not p.exists() and "/" not in path and not p.suffix:
        return _run_dir(path), None
    if not p.exists():
        raise UserError(f"{p}: no such file")
    return p, None


def load(target: Path, run_dir: Path | None, job: str | None = None, step: str | None = None,
         use_cache: bool = True, cancel: threading.Event | None = None) -> Any:
    """The report of ``target``: a job folder merged with ``job`` / ``step``, else ``load_report``."""
    from gpuscope.nsys.job import is_job_dir
    from gpuscope.nsys.report import load_job, load_report

    if is_job_dir(target):
        return load_job(target, job_id=job, step=step)
    if job or step:
        raise UserError(f"--job / --step are for a job folder of node runs (gpuscope run --job-dir), not {target}")
    return load_report(target, run_dir=run_dir if target != run_dir else None, use_cache=use_cache, cancel=cancel)


def no_data(report: Any) -> str | None:
    """Why an export cannot be summarised (no NVTX or CUDA data), or None."""
    has_data = any(p["nvtx_ranges"] or p["marks"] or p["kernels"] for p in report.processes)
    if report.sqlite_path is not None and not has_data and "NVTX_EVENTS" not in report.tables:
        return (f"{report.sqlite_path}: no NVTX or CUDA data in this export "
                "(record with nsys profile --trace=nvtx[,cuda])")
    return None


def _finding(f: Any) -> dict[str, Any]:
    return {k: getattr(f, k, None) for k in ("code", "message", "advice")}


def to_json(report: Any) -> dict[str, Any]:
    """The ``--json`` object (see docs/NSYS-REPORTS.md for the field list)."""
    out = {
        "path": str(report.path),
        "sqlite": str(report.sqlite_path) if report.sqlite_path else None,
        "nsys_version": report.nsys_version,
        "schema_version": report.schema_version,
        "naming": report.naming,
        "processes": report.processes,
        "findings": [_finding(f) for f in report.findings],
        "notes": report.notes,
        "coverage": report.coverage.to_dict() if report.coverage is not None else None,
    }
    if getattr(report, "job", None) is not None:
        out["job"] = report.job
    for key, _ in SUMMARY_KEYS:
        if key in report.summaries:
            out[f"{key}_summary"] = [r.to_dict() for r in report.summaries[key]]
    from gpuscope.gpu import sharing_report   # who ran when on each GPU (docs/GPU-SHARING.md)

    out["gpu_sharing"] = sharing_report.report_json(report)
    return out


def report_object(path: str, cancel: threading.Event | None = None) -> dict[str, Any]:
    """What ``gpuscope report PATH --json`` prints (PATH: a report, an export, a run folder or id)."""
    from gpuscope import numpy_import
    from gpuscope.attach import report as attached

    numpy_import.preload()
    target, run_dir = resolve(None, path)
    if target.is_dir() and attached.is_attached(target):
        return dict(attached.report_json(target))
    report = load(target, run_dir, cancel=cancel)
    why = no_data(report)
    if why:
        raise UserError(why)
    return to_json(report)
