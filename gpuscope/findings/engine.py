"""Findings of a finished run, from its folder: event logs, stderr, the run's record and the live findings.

``analyse_run(run_dir)`` is what ``gpuscope findings RUN_ID`` and the end of a run use. The rules
are the registry's (:mod:`gpuscope.findings.registry`): every after-run check runs on one
:class:`~gpuscope.findings.registry.RunInputs`. Rules that only the live recorder can see (no
progress, telemetry) are kept in ``findings.json`` by
:class:`gpuscope.findings.recorder.FindingsRecorder` and merged.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from gpuscope import rundir
from gpuscope.finding import Finding, merge
from gpuscope.findings import process_rules, registry
from gpuscope.findings.output_rules import OutputScanner
from gpuscope.trace.events import ProcessEvents, read_run_events

if TYPE_CHECKING:
    from gpuscope.runrecord import RunRecord

FINDINGS_FILE = "findings.json"
STDERR_LIMIT = 64 << 20       # read at most this much of stderr.log (its last bytes)


def read_saved(run_dir: str | os.PathLike[str]) -> list[Finding]:
    """The findings saved in the run folder (by the live recorder), or []."""
    try:
        with open(os.path.join(run_dir, FINDINGS_FILE), encoding="utf-8") as fh:
            rows = json.load(fh)
    except (OSError, ValueError):
        return []
    out = []
    for row in rows.get("findings", []) if isinstance(rows, dict) else []:
        try:
            out.append(Finding.from_dict(row))
        except (KeyError, ValueError, TypeError):
            continue
    return out


def save(run_dir: str | os.PathLike[str], findings: list[Finding], extra: dict[str, Any] | None = None) -> None:
    data = {"findings": [f.to_dict() for f in findings], **(extra or {})}
    tmp = os.path.join(run_dir, FINDINGS_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8", opener=lambda path, flags: os.open(path, flags, 0o600)) as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, os.path.join(run_dir, FINDINGS_FILE))


def scan_stderr(path: str | os.PathLike[str]) -> OutputScanner:
    scanner = OutputScanner()
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - STDERR_LIMIT))
            while chunk := fh.read(1 << 20):
                scanner.feed(chunk)
    except OSError:
        pass
    scanner.finish()
    return scanner


def _record(run_dir: str | os.PathLike[str]) -> RunRecord | None:
    """The finished run's record (None while it has no summary)."""
    from gpuscope.runrecord import read_folder

    if not os.path.isfile(os.path.join(run_dir, rundir.SUMMARY)):
        return None
    return read_folder(run_dir)


def analyse_events(run_dir: str | os.PathLike[str], events: list[ProcessEvents] | None = None, *,
                   stopped: bool = False, scanner: OutputScanner | None = None, oom_killed: int = 0,
                   facts: process_rules.ProcessFacts | None = None,
                   record: RunRecord | None = None, stop_ns: int | None = None) -> list[Finding]:
    """Every after-run rule's findings (the record's rules too when ``record`` is given: the live
    recorder calls this before the record exists). ``oom_killed``: OOM kills the run's cgroup
    counted while it ran (the live recorder knows it); ``facts``: what the live recorder's scans of
    the logs gathered (only what they have not read yet is read here)."""
    events = read_run_events(run_dir) if events is None else events
    facts = process_rules.ProcessFacts() if facts is None else facts
    process_rules.scan_info(os.path.join(run_dir, rundir.EVENTS), facts)
    scanner = scanner if scanner is not None else scan_stderr(os.path.join(run_dir, rundir.STDERR))
    run = registry.RunInputs(os.fspath(run_dir), events, scanner.findings(), record, facts, scanner,
                             stopped, oom_killed, stop_ns)
    found = registry.run_after(run)
    if any(f.code == "cuda-after-fork" for f in found):
        from gpuscope.findings import torch_rules

        found = torch_rules.merge_cuda_message(found)
    return found


def load_rules(run_dir: str | os.PathLike[str] | None = None) -> None:
    """Import the rule modules ahead (the live recorder calls it while the program runs: the end of
    the run then does not wait for their imports): those whose inputs the run in ``run_dir`` has so
    far (the end imports any whose input appeared since), or every one."""
    if run_dir is None:
        registry.load()
    else:
        registry.load_after(registry.RunInputs(os.fspath(run_dir)))


def _saved_stop(run_dir: str | os.PathLike[str]) -> int | None:
    """When the live recorder saw the stop (``stop_ns`` in findings.json), or None."""
    try:
        with open(os.path.join(run_dir, FINDINGS_FILE), encoding="utf-8") as fh:
            value = json.load(fh).get("stop_ns")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def analyse_run(run_dir: str | os.PathLike[str]) -> list[Finding]:
    """Every finding of a finished run, one list: recomputed from the folder, plus the saved live ones."""
    from gpuscope.status import RunStatus

    record = _record(run_dir)
    stopped = record is not None and record.status is RunStatus.STOPPED
    found = analyse_events(run_dir, stopped=stopped, record=record, stop_ns=_saved_stop(run_dir) if stopped else None)
    saved = read_saved(run_dir)
    if any(f.code == "cuda-after-fork" and f.pids for f in found):   # the live stderr-only one is merged in
        saved = [f for f in saved if not (f.code == "cuda-after-fork" and not f.pids)]
    return merge(saved + found)
