"""The one entry point of the CLI and the app for a report: :func:`load_report`.

It opens a ``.sqlite`` export, a ``.nsys-rep`` (exported first) or a gpuscope run folder, and
returns a :class:`Report`: the Timeline, the summaries equal to ``nsys stats``, the processes,
nsys's diagnostics and, for a gpuscope run, the coverage of its processes. Large exports are
cached, parsed, under ``<cache>/timelines``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpuscope.errors import UserError
from gpuscope.nsys.reader import DAMAGE, ExportInfo, check_layout, damaged, export_info, open_export, read_timeline
from gpuscope.nsys.rep_export import export_rep
from gpuscope.trace import timeline as T

@dataclass
class Report:
    """What the CLI prints and the app shows for one nsys export (and, optionally, a gpuscope run).

    ``timeline`` is loaded on first access when the report came from the cache (the CLI's
    ``--json`` needs only the summaries).
    """

    path: Path                     # what the user opened
    sqlite_path: Path | None       # the export that was read (None for an event-log-only run)
    nsys_version: str | None
    schema_version: str | None
    naming: str                    # nvtx_sum naming rule used: "plain" or "colon"
    summaries: dict[str, list]     # "nvtx", "kernel", "cuda_api", "memop", "osrt" -> [SummaryRow]
    processes: list[dict]          # per process: pid, name, counts, sources
    findings: list = field(default_factory=list)    # gpuscope.nsys.diagnostics.Finding
    notes: list[str] = field(default_factory=list)
    coverage: object | None = None  # gpuscope.trace.coverage.Coverage for a gpuscope run
    tables: set[str] = field(default_factory=set)   # tables of the export
    job: dict | None = None        # a job across nodes: nodes, clocks, ranks, stragglers (gpuscope.nsys.job)
    torch: object | None = None    # the run's PyTorch profiler traces (gpuscope.views.torch_ops.TorchReport)
    loaded: T.Timeline | None = field(default=None, repr=False)
    loader: Callable[[], T.Timeline] | None = field(default=None, repr=False)

    @property
    def timeline(self) -> T.Timeline:
        if self.loaded is None:
            self.loaded = self.loader() if self.loader is not None else T.Timeline()
        return self.loaded


def load_report(path: str | Path, *, run_dir: str | Path | None = None, use_cache: bool = True,
                cancel: threading.Event | None = None) -> Report:
    """Open a ``.sqlite`` export, a ``.nsys-rep`` (exported first) or a gpuscope run folder.

    Large exports (``CACHE_MIN_ROWS`` rows and more) are cached as .npz (Timeline + summaries)
    under ``<cache>/timelines``, keyed by path, size and mtime; ``use_cache=False`` or
    ``GPUSCOPE_NO_CACHE=1`` bypasses it. Raises :class:`UserError` with one line for anything
    the user can fix. ``cancel`` (set from another thread) stops a running ``nsys export``.
    """
    p = Path(path)
    if p.is_dir():
        from gpuscope.nsys import job

        if job.is_job_dir(p):
            return load_job(p)
        return load_run(p, cancel=cancel)
    if p.suffix == ".nsys-rep":
        if not p.exists():
            raise UserError(f"{p}: no such file")
        p_sqlite = export_rep(p, cancel=cancel)
    else:
        p_sqlite = p
    try:
        conn = open_export(p_sqlite)
        try:
            info = export_info(conn)
            check_layout(conn, info, p_sqlite)
            rep = _from_cache(p, p_sqlite, info, use_cache) or _parse(p, p_sqlite, conn, info, use_cache)
        except DAMAGE as exc:
            raise damaged(p_sqlite, exc) from None
        finally:
            conn.close()
    except UserError as exc:
        raise named_for(p, p_sqlite, exc) from None
    if run_dir is not None:
        from gpuscope.trace import coverage
        coverage.attach_run(rep, Path(run_dir))
    return rep


def load_job(job_dir: Path, job_id: str | None = None, step: str | None = None) -> Report:
    """A job folder of node runs (``gpuscope run --job-dir``), merged: :mod:`gpuscope.nsys.job`."""
    from gpuscope.nsys import job

    return Report(**job.merge_job(Path(job_dir), lambda export, node_dir: load_report(export, run_dir=node_dir),
                                  job_id=job_id, step=step))


def load_run(run_dir: Path, cancel: threading.Event | None = None) -> Report:
    """A gpuscope run folder: its nsys export plus coverage, or its event logs alone."""
    from gpuscope.trace import coverage

    export = coverage.find_export(run_dir)
    if export is not None:
        return load_report(export, run_dir=run_dir, cancel=cancel)
    return load_events(run_dir)


NO_EXPORT_NOTE = "no nsys export in this run: ranges are gpuscope's own records"
PENDING_NOTE = "nsys is still finishing its report: ranges are gpuscope's own records until it is read"


def load_events(run_dir: str | Path, note: str = NO_EXPORT_NOTE) -> Report:
    """A run folder's report from gpuscope's own event logs alone, whatever else it holds (the app
    shows this, with ``PENDING_NOTE``, while nsys is still writing, importing or exporting)."""
    from gpuscope.trace import coverage, summary

    run_dir = Path(run_dir)
    logs = coverage.read_events(run_dir)
    if not logs:
        raise UserError(f"{run_dir}: no nsys export, no gpuscope event logs (events/) and no node runs of a job "
                        "(*/node.json) in this folder")
    tl = coverage.timeline_from_events(logs)
    sums = {"nvtx": summary.nvtx_summary(tl, "plain", source=T.SOURCE_GPUSCOPE), "kernel": [], "osrt": []}
    return Report(path=run_dir, sqlite_path=None, nsys_version=None, schema_version=None, naming="plain",
                  summaries=sums, processes=summary.process_table(tl), loaded=tl,
                  notes=[note])


def _report(p: Path, p_sqlite: Path, info: ExportInfo, extra: dict, notes: list[str]) -> Report:
    return Report(path=p, sqlite_path=p_sqlite, nsys_version=info.product_version,
                  schema_version=info.schema_version, naming=info.naming, summaries=extra["summaries"],
                  processes=extra["processes"], findings=extra["findings"], notes=list(notes),
                  tables=set(info.tables))


def _parse(p: Path, p_sqlite: Path, conn: sqlite3.Connection, info: ExportInfo, use_cache: bool) -> Report:
    """Summaries first (summary-only reader); the Timeline is read when first asked for."""
    from gpuscope.nsys.summary_reader import read_summary_data

    quick = read_summary_data(conn, info)
    if quick is None:
        return _parse_full(p, p_sqlite, conn, info, use_cache)
    extra = {"summaries": quick.summaries, "processes": quick.processes,
             "findings": _diagnose(conn, quick.nvtx_kinds)}
    rep = _report(p, p_sqlite, info, extra, quick.notes)

    def load() -> T.Timeline:
        try:
            tl = read_export(p_sqlite)
        except UserError as exc:
            raise named_for(p, p_sqlite, exc) from None
        _store(p_sqlite, tl, extra, use_cache)
        return tl

    rep.loader = load
    return rep


def named_for(p: Path, p_sqlite: Path, exc: UserError) -> UserError:
    """A line about the export of an ``.nsys-rep`` names the file the user gave, then its export."""
    text, prefix = str(exc), f"{p_sqlite}: "
    if p == p_sqlite or not text.startswith(prefix):
        return exc
    return UserError(f"{p}: its export {p_sqlite.name}: {text[len(prefix):]}")


def read_export(p_sqlite: Path) -> T.Timeline:
    """The whole Timeline of an export (the report's lazy read); damage is one :class:`UserError` line."""
    conn = open_export(p_sqlite)
    try:
        return read_timeline(conn)
    except DAMAGE as exc:
        raise damaged(p_sqlite, exc) from None
    finally:
        conn.close()


def _parse_full(p: Path, p_sqlite: Path, conn: sqlite3.Connection, info: ExportInfo, use_cache: bool) -> Report:
    from gpuscope.trace import summary

    tl = read_timeline(conn, info)
    extra = {"summaries": summary.all_summaries(tl, naming=info.naming, generation=info.stats_generation),
             "processes": summary.process_table(tl), "findings": _diagnose(conn)}
    _store(p_sqlite, tl, extra, use_cache)
    rep = _report(p, p_sqlite, info, extra, tl.notes)
    rep.loaded = tl
    return rep


# --------------------------------------------------------------------------- the parsed-report cache

CACHE_MIN_ROWS = 100_000
CACHE_KEEP = 16
# Bump when the reader changes what it computes: old cache entries then simply miss.
CACHE_FORMAT = 3


def _cache_file(p_sqlite: Path) -> Path:
    from gpuscope import paths

    st = p_sqlite.stat()
    from gpuscope import __version__

    ident = f"{CACHE_FORMAT}|{__version__}|{p_sqlite.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    key = hashlib.sha1(ident.encode()).hexdigest()[:20]
    return paths.cache_dir() / "timelines" / f"{key}.npz"


def _cache_on(use_cache: bool) -> bool:
    return use_cache and not os.environ.get("GPUSCOPE_NO_CACHE")


def _from_cache(p: Path, p_sqlite: Path, info: ExportInfo, use_cache: bool) -> Report | None:
    """The report from the cache (summaries now, the timeline when first asked for), or None."""
    if not _cache_on(use_cache):
        return None
    from gpuscope.trace.summary import SummaryRow

    cache = _cache_file(p_sqlite)
    try:
        extra, notes = T.load_meta(cache)
        extra["summaries"] = {k: [SummaryRow(**r) for r in rows] for k, rows in extra["summaries"].items()}
        extra["findings"] = _findings_from(extra["findings"])
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        return None
    rep = _report(p, p_sqlite, info, extra, notes)

    def load() -> T.Timeline:
        try:
            return T.load(cache)[0]
        except (OSError, ValueError, KeyError):   # evicted meanwhile: parse the export again
            try:
                return read_export(p_sqlite)
            except UserError as exc:
                raise named_for(p, p_sqlite, exc) from None

    rep.loader = load
    return rep


def _store(p_sqlite: Path, tl: T.Timeline, extra: dict, use_cache: bool) -> None:
    rows = len(tl.ranges) + len(tl.osrt) + len(tl.cuda_api) + len(tl.kernels) + len(tl.memops)
    if not _cache_on(use_cache) or rows < CACHE_MIN_ROWS:
        return
    target = _cache_file(p_sqlite)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        old = sorted(target.parent.glob("*.npz"), key=lambda f: f.stat().st_mtime)
        for f in old[: max(0, len(old) - CACHE_KEEP + 1)]:
            f.unlink(missing_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        sums = {k: [r.to_dict() | {"name": r.name} for r in v] for k, v in extra["summaries"].items()}
        found = [f.to_dict() for f in extra["findings"]]
        T.save(tl, tmp, {"summaries": sums, "processes": extra["processes"], "findings": found})
        tmp.replace(target)
    except OSError:
        pass   # a cache is an optimisation; a read-only home must not fail a report


def _findings_from(rows: list[dict]) -> list:
    from gpuscope.nsys.diagnostics import Finding

    return [Finding(**{**r, "pids": tuple(r.get("pids", ()))}) for r in rows]


def _diagnose(conn: sqlite3.Connection, nvtx_kinds: dict[int, set[int]] | None = None) -> list:
    from gpuscope.nsys.diagnostics import diagnose

    return list(diagnose(conn, nvtx_kinds))
