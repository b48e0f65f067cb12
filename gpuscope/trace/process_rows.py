"""What a run's processes did: one :class:`ProcessRow` per process, built once from its event log
and the sampler's figures (exact figures from the exit record win over sampled ones)."""

from __future__ import annotations

import os

from gpuscope.status import signal_name
from gpuscope.trace.events import ProcessEvents, read_run_events
from gpuscope.trace.process_row import NOT_INJECTED, PROGRAM_ROLES, ProcessRow, SampledProcess, TopRange

INFO_KEYS = ("argv", "nvtx", "forked", "parent_role", "local_rank", "start_method_explicit", "executable",
             "target", "ray", "ray_address", "ray_task", "ray_actor")
# how the process reported its status without evidence of a code: the launcher's wait() knows better
_INFERRED = ("end",)


def row_from_events(pe: ProcessEvents) -> ProcessRow:
    """A process's row from its event log alone (no sampled figures yet)."""
    ended = pe.end_ns
    if ended is None:
        ended = pe.range_end()
    x = pe.exit or {}
    code = pe.exit_code
    cpu, rss = pe.exact_usage()
    worker_id = pe.info.get("worker_id")
    info = {k: pe.info.get(k) for k in INFO_KEYS if pe.info.get(k) is not None}
    if pe.pre_exec is not None:   # a fork child that exec'd this interpreter: one process, one row
        info["before_exec"] = pe.pre_exec.role
    started = pe.first_start_ns
    start_ticks = (pe.pre_exec or pe).header.get("start_ticks")
    return ProcessRow(
        pid=pe.pid, ppid=pe.ppid, start_ticks=start_ticks if isinstance(start_ticks, int) else None,
        role=pe.role, start_method=pe.start_method, rank=pe.rank,
        name=pe.info.get("os_name"), mp_name=pe.info.get("mp_name"),
        exit_code=code if code is None or code >= 0 else None,
        exit_signal=signal_name(-code) if code is not None and code < 0 else None,
        exit_source="process" if code is not None else None, exit_how=x.get("how"),
        clean_exit=pe.exit is not None,
        started_ns=pe.wall_ns(started), ended_ns=pe.wall_ns(ended) if ended is not None else None,
        lifetime_s=round((ended - started) / 1e9, 3) if ended is not None else None,
        ranges=pe.range_count, marks=len(pe.marks), range_names=pe.range_names(),
        top_ranges=[TopRange(n, c, t) for n, c, t in pe.top_ranges(3)],
        injection_errors=len(pe.errors), log_truncated=pe.truncated,
        info=info,
        cpu_seconds=round(cpu, 3) if cpu is not None else None, cpu_source="exact" if cpu is not None else None,
        cpu_user_seconds=x.get("cpu_user_s"), cpu_system_seconds=x.get("cpu_system_s"),
        peak_rss_bytes=rss, rss_source="exact" if rss is not None else None,
        worker_id=int(worker_id) if isinstance(worker_id, int) else None,
    )


def _apply_root_exit(rows: list[ProcessRow], root_role: str, root_exit: int | None) -> None:
    """The launched program's exit status (what gpuscope's launcher waited for) goes to ``root_role``
    when that process recorded none, or only inferred 0 from a normal end (``raise SystemExit(3)``
    at top level goes through no hook)."""
    for row in rows:
        if row.role != root_role or root_exit is None:
            continue
        if (row.exit_code is None and row.exit_signal is None) or row.exit_how in _INFERRED:
            row.exit_code, row.exit_source = root_exit, "launcher"


def _apply_child_exits(rows: list[ProcessRow], events: list[ProcessEvents]) -> None:
    """A multiprocessing child killed before its exit record (SIGKILL, SIGTERM: no hook runs) has
    the status its parent's multiprocessing reaped (the parent's ``child_exits``, docs/EVENTS.md):
    ``exit_source`` "parent". Negative codes are signals, as multiprocessing gives them."""
    reaped: dict[int, int] = {}
    for pe in events:
        for child, code in (pe.info.get("child_exits") or {}).items():
            try:
                reaped[int(child)] = int(code)
            except (TypeError, ValueError):
                continue
    for row in rows:
        code = reaped.get(row.pid)
        if code is None or row.exit_code is not None or row.exit_signal is not None:
            continue
        row.exit_code = code if code >= 0 else None
        row.exit_signal = signal_name(-code) if code < 0 else None
        row.exit_source = "parent"


def _merge_sampled(row: ProcessRow, t: SampledProcess) -> None:
    """The sampler's figures, where the process gave no exact one. A zero RSS is a zombie's, never
    a measurement of a live process: it stays unknown."""
    if row.cpu_seconds is None and t.cpu_seconds is not None:
        row.cpu_seconds, row.cpu_source = round(t.cpu_seconds, 3), "sampled"
    if row.peak_rss_bytes is None and t.peak_rss_bytes:
        row.peak_rss_bytes, row.rss_source = t.peak_rss_bytes, "sampled"
    row.peak_gpu_mem_bytes = t.peak_gpu_mem_bytes
    if t.create_time is not None:
        row.info["create_time"] = t.create_time
    _exec_of_fork_child(row, t.name)


def _exec_of_fork_child(row: ProcessRow, name: str | None) -> None:
    """A fork child that exec'd a program that is not Python (Ray's ``gcs_server``, ``raylet``:
    ``subprocess.Popen(preexec_fn=...)`` runs Python's fork handlers before the exec) left only its
    fork child log: the OS name it ended with says what it became. gpuscope names fork children
    ``gs:fork``; a fork child that stayed Python and ended wrote its exit record."""
    if row.role != "fork child" or row.clean_exit or row.ranges or not name or name.startswith("gs:"):
        return
    row.role = PROGRAM_ROLES.get(name, NOT_INJECTED)
    row.name = name
    row.info["exec"] = name


def _not_injected_row(t: SampledProcess) -> ProcessRow:
    """A process gpuscope could not inject: not Python, isolated (-I/-E/-S), or nsys itself."""
    row = ProcessRow(pid=t.pid, ppid=t.ppid, start_ticks=t.start_ticks,
                     role=PROGRAM_ROLES.get(t.name or "", NOT_INJECTED), name=t.name,
                     info={"cmdline": list(t.cmdline), "create_time": t.create_time})
    _merge_sampled(row, t)
    return row


def build_rows(run_dir: str | os.PathLike[str], root_role: str = "main", root_exit: int | None = None,
               seen: list[SampledProcess] | None = None,
               events: list[ProcessEvents] | None = None) -> list[ProcessRow]:
    """Every process of a run: the logged ones (in start order), then the ones only the sampler saw.
    ``events``: the run's event logs when the caller has read them already."""
    events = read_run_events(run_dir) if events is None else events
    rows = [row_from_events(pe) for pe in events]
    _apply_root_exit(rows, root_role, root_exit)
    _apply_child_exits(rows, events)
    if seen is not None:
        add_sampled(rows, seen)
    return rows


def add_sampled(rows: list[ProcessRow], seen: list[SampledProcess]) -> None:
    """The sampler's per-process figures into ``rows``; a process it saw without a log gets a row.
    A process is known by its key (pid and start): figures of another process that had the same
    pid (a pid reused during the run) are not merged into a row."""
    logged = {row.pid for row in rows}
    by_pid = {t.pid: t for t in seen}
    for row in rows:
        t = by_pid.get(row.pid)
        if t is not None and _same_process(row, t):
            _merge_sampled(row, t)
    rows.extend(_not_injected_row(t) for pid, t in sorted(by_pid.items()) if pid not in logged)


def _same_process(row: ProcessRow, t: SampledProcess) -> bool:
    """Whether the sampled process is the row's: the same start where both know it."""
    return row.start_ticks is None or t.start_ticks is None or row.start_ticks == t.start_ticks
