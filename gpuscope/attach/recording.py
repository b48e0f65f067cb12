"""An attached session as a run: its folder (spec, summary, findings, stacks) and its store row.

The run folder is gpuscope's own (under the data directory): nothing is written into the job's
folders. ``spec.json`` and ``summary.json`` carry ``"kind": "attached"``; the store's row has the
root's command line as its script and ``attached`` as its launcher, so History lists it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope import rundir as layout

if TYPE_CHECKING:
    from gpuscope.attach.stacks import TreeStacks
    from gpuscope.attach.view import AttachedProcess
    from gpuscope.finding import Finding
    from gpuscope.runrecord.model import RunRecord

KIND = "attached"


def _write_json(path: str, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8", opener=lambda p, flags: os.open(p, flags, 0o600)) as fh:
        json.dump(data, fh)


def attach_spec(root_pid: int, cmdline: tuple[str, ...], start_method: str | None, cwd: str | None) -> dict[str, Any]:
    """The spec of an attached run (a :class:`gpuscope.spec.RunSpec` dict plus ``kind`` and ``root_pid``)."""
    from gpuscope.spec import RunSpec

    spec = RunSpec(script=" ".join(cmdline) or f"pid {root_pid}", cwd=cwd, launcher=KIND,
                   start_method=start_method or "unknown").to_dict()
    return {**spec, "kind": KIND, "root_pid": root_pid}


def open_run(root_pid: int, cmdline: tuple[str, ...], start_method: str | None,
             cwd: str | None, store: Any = None) -> tuple[str, str, dict[str, Any]]:
    """(run id, folder, spec) of a new attached run, its folder written and its store row inserted."""
    from gpuscope.runs.versions import versions
    from gpuscope.spec import RunSpec
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    run_id, folder = layout.reserve_run_dir(tighten=False)
    spec = attach_spec(root_pid, cmdline, start_method, cwd)
    vers = versions(RunSpec.from_dict(spec))
    _write_json(os.path.join(folder, layout.SPEC), {"run_id": run_id, "kind": KIND, "spec": spec,
                                                    "argv": list(cmdline), "versions": vers})
    conn = db.connect(store)
    try:
        with conn:
            store_runs.insert_run(conn, run_id=run_id, spec=spec, run_dir=folder, versions=vers)
            store_runs.mark_started(conn, run_id, time.time_ns())
    finally:
        conn.close()
    return run_id, folder, spec


def rows(procs: list[AttachedProcess], summary: dict[int, dict[str, Any]]) -> list[Any]:
    """The record's process rows: what was seen of each process."""
    from gpuscope.trace.process_row import ProcessRow

    out = []
    for p in procs:
        s = summary.get(p.pid, {})
        first, last = s.get("create_time"), None if p.alive else time.time()
        out.append(ProcessRow(pid=p.pid, ppid=p.ppid, start_ticks=p.start_ticks or None, role=p.role,
                              start_method=p.start_method, rank=p.rank, name=s.get("name"),
                              started_ns=int(first * 1e9) if first else None,
                              ended_ns=int(last * 1e9) if last else None,
                              cpu_seconds=p.cpu_s, peak_rss_bytes=s.get("peak_rss_bytes", p.rss_bytes),
                              peak_gpu_mem_bytes=s.get("peak_gpu_mem_bytes"),
                              info={"cmdline": list(p.cmdline), "state": p.state, "attached": True}))
    return out


def finish_run(run_id: str, folder: str, started_ns: int, procs: list[AttachedProcess],
               summary: dict[int, dict[str, Any]], findings: list[Finding], stacks: TreeStacks | None,
               ended: bool, notes: list[str], store: Any = None) -> RunRecord:
    """Write the run's record (summary, findings, last stacks) and close its store row."""
    from gpuscope.findings import engine
    from gpuscope.findings.stacks import save_latest
    from gpuscope.runrecord.model import RunRecord
    from gpuscope.status import ExitStatus, RunStatus
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    status = RunStatus.EXITED if ended else RunStatus.STOPPED
    record = RunRecord(run_id=run_id, run_folder=folder, status=status, exit=ExitStatus(None, None),
                       started_ns=started_ns, ended_ns=time.time_ns(), processes=rows(procs, summary),
                       left_running=[p.pid for p in procs if p.alive] if ended else [],
                       notes=notes, findings=list(findings), kind=KIND)
    _write_json(os.path.join(folder, layout.SUMMARY), record.to_json())
    engine.save(folder, list(findings))
    if stacks is not None and stacks.processes:
        save_latest(Path(folder), stacks.processes)
    conn = db.connect(store)
    try:
        with conn:
            store_runs.finish_run(conn, run_id, status=status, ended_ns=record.ended_ns, exit_code=None,
                                  signal=None, processes=record.processes)
    finally:
        conn.close()
    return record
