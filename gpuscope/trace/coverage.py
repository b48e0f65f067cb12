"""Did nsys see every process of a gpuscope run? Coverage, merge, and event-log-only timelines.

gpuscope's own event logs (docs/EVENTS.md) list every Python process the startup hook reached and
every range it recorded. Comparing them with an nsys export tells, per process, whether nsys kept
its NVTX ranges, how many it lost, the likely reason and the fix. A merged Timeline adds gpuscope's
ranges (``source = gpuscope``) for the processes nsys missed, on the export's clock.

Clock: event-log times are CLOCK_MONOTONIC ns. An nsys timeline time ``t`` maps to monotonic
``mono_base_ns + t`` when the export carries it; otherwise both sides go through the wall clock
(``wall_base_ns`` = ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``; each log's H-line anchor pair).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.fix import Fix, SetNsysForkTracing, SetStartMethod, fix_from_dict, fix_to_dict
from gpuscope.trace import timeline as T
from gpuscope.trace.process_row import display_name


# gpuscope's domain ids start here so they never collide with nsys's ids of the same process.
GPUSCOPE_DOMAIN_BASE = 1 << 20


@dataclass
class ProcessCoverage:
    """How many of one process's ranges nsys kept, and why not, with the fix."""

    pid: int
    role: str
    start_method: str | None
    forked: bool
    gpuscope_ranges: int
    nsys_ranges: int
    status: str                 # ok | partial | missing | no-ranges | nsys-only
    lost: int = 0               # ranges gpuscope recorded that nsys does not have
    reason: str | None = None
    fix: str | None = None
    action: Fix | None = None   # what "Apply fix" changes for the next run (None: a change to the code or setup)


@dataclass
class Coverage:
    """The ranges nsys kept, per process, against gpuscope's own logs."""

    processes: list[ProcessCoverage] = field(default_factory=list)
    fork_flag: bool | None = None   # --trace-fork-before-exec, when the run says

    @property
    def missing(self) -> list[ProcessCoverage]:
        return [p for p in self.processes if p.status in ("missing", "partial")]

    def to_dict(self) -> dict:
        return {"processes": [{**asdict(p), "action": fix_to_dict(p.action) if p.action is not None else None}
                              for p in self.processes], "fork_flag": self.fork_flag,
                "processes_with_ranges_in_nsys": sum(1 for p in self.processes if p.nsys_ranges),
                "processes_missing": sum(1 for p in self.processes if p.status == "missing"),
                "ranges_lost": sum(p.lost for p in self.processes)}

    @classmethod
    def from_dict(cls, d: dict) -> Coverage:
        """The coverage :meth:`to_dict` made (the counts follow from its processes), each process's
        structured fix included (a kind this gpuscope does not know reads as none)."""
        names = {f.name for f in fields(ProcessCoverage)} - {"action"}
        return cls([ProcessCoverage(**{k: v for k, v in p.items() if k in names},
                                    action=fix_from_dict(p.get("action")))
                    for p in d.get("processes") or []], d.get("fork_flag"))


def read_events(run_dir: Path) -> list:
    from gpuscope.trace.events import read_run_events
    return read_run_events(run_dir)


# --------------------------------------------------------------------------- event logs -> Timeline

def _argb(color: str) -> int:
    if color and color.startswith("#") and len(color) == 7:
        try:
            return 0xFF000000 | int(color[1:], 16)
        except ValueError:
            return 0
    return 0


def wall_minus_mono(logs: list) -> int | None:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC for a run's logs (one machine): the median of their H-line
    anchor pairs. It is the same for every process of a machine; a pair read across a preemption
    (the two clock reads ms apart on a loaded machine) is off by it, and the median is not."""
    diffs = sorted(int(pe.header["anchor_wall_ns"]) - int(pe.header["anchor_mono_ns"]) for pe in logs
                   if "anchor_wall_ns" in pe.header and "anchor_mono_ns" in pe.header)
    return diffs[len(diffs) // 2] if diffs else None


def _offset(pe, tl: T.Timeline, wall_mono: int | None = None) -> int:
    """What to subtract from this log's monotonic times to get ``tl``'s times (``wall_mono``: the
    run's :func:`wall_minus_mono`, else this log's own anchor pair)."""
    if tl.mono_base_ns is not None:
        return int(tl.mono_base_ns)
    if wall_mono is None:
        wall_mono = int(pe.header["anchor_wall_ns"]) - int(pe.header["anchor_mono_ns"])
    return int(tl.wall_base_ns or 0) - wall_mono


def add_process_events(tl: T.Timeline, logs: list, pids: set[int] | None = None) -> int:
    """Append ranges, marks, threads and processes of ``logs`` (all, or those of ``pids``) as source=gpuscope."""
    ranges: list[T.Ranges] = []
    marks: list[tuple[int, ...]] = []
    threads: dict[tuple[int, int], int] = {}
    domains: dict[tuple[int, str], int] = {}
    wall_mono = wall_minus_mono(logs)
    for pe in logs:
        if pids is not None and pe.pid not in pids:
            continue
        off = _offset(pe, tl, wall_mono)
        lut = _name_luts(tl, pe, domains)      # name id -> (string id, ARGB colour, domain id)
        if len(pe.ranges):
            ranges.append(_log_ranges(pe, off, lut))
            threads.update({(pe.pid, int(t)): -1 for t in np.unique(pe.ranges["tid"]).tolist()})
        for t, tid, nid in pe.marks:
            ok = 0 <= nid < len(lut[0])
            marks.append((t - off, pe.pid, tid, *(int(a[nid]) if ok else d for a, d in zip(lut, (-1, 0, 0)))))
            threads.setdefault((pe.pid, int(tid)), -1)
        _add_process(tl, pe)
    tl.ranges = T.Ranges.concat([tl.ranges, *ranges])
    T.compute_depths(tl.ranges)
    if marks:
        m = np.array(marks, dtype=np.int64)
        tl.marks = T.Marks.concat([tl.marks, T.Marks(
            start_ns=m[:, 0], pid=m[:, 1].astype(np.int32), tid=m[:, 2].astype(np.int32),
            name_id=m[:, 3].astype(np.int32), color=m[:, 4].astype(np.uint32),
            domain_id=m[:, 5].astype(np.int32), source=np.full(len(m), T.SOURCE_GPUSCOPE, np.uint8))])
    _add_threads(tl, threads)
    _add_domains(tl, domains)
    return sum(len(r) for r in ranges)


def _name_luts(tl: T.Timeline, pe, domains: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per name id of one log: Timeline string id, ARGB colour, domain id (new domains go into ``domains``)."""
    size = max(pe.names, default=-1) + 1
    sid, color, dom = np.full(size, -1, np.int32), np.zeros(size, np.uint32), np.zeros(size, np.int32)
    for nid, nm in pe.names.items():
        sid[nid] = tl.strings.intern(nm.name)
        color[nid] = _argb(nm.color)
        if nm.domain:
            dom[nid] = domains.setdefault((pe.pid, nm.domain), GPUSCOPE_DOMAIN_BASE + len(domains))
    return sid, color, dom


def _log_ranges(pe, off: int, lut: tuple[np.ndarray, np.ndarray, np.ndarray]) -> T.Ranges:
    rr = pe.ranges
    n = len(rr)
    nid = rr["nid"].astype(np.int64)
    known = (nid >= 0) & (nid < len(lut[0]))
    safe = np.where(known, nid, 0)

    def pick(a: np.ndarray, default: int) -> np.ndarray:
        return np.where(known, a[safe] if len(a) else default, default).astype(a.dtype)

    return T.Ranges(
        start_ns=rr["t0"] - off, end_ns=rr["t1"] - off, pid=np.full(n, pe.pid, np.int32),
        tid=rr["tid"].astype(np.int32), depth=np.zeros(n, np.int16), name_id=pick(lut[0], -1),
        color=pick(lut[1], 0), domain_id=pick(lut[2], 0), category=np.zeros(n, np.int32),
        style=(rr["style"] == b"S").astype(np.uint8), source=np.full(n, T.SOURCE_GPUSCOPE, np.uint8),
        flags=np.zeros(n, np.uint8), end_tid=np.full(n, -1, np.int32))


def _process_label(pe) -> str:
    """The name every view gives the process (its role: ``trace.process_row.display_name``)."""
    worker = pe.info.get("worker_id")
    return display_name(pe.role, worker if isinstance(worker, int) else None, pe.rank,
                        pe.info.get("name") or pe.info.get("os_name"))


def _add_process(tl: T.Timeline, pe) -> None:
    """Add or name a process from its log (gpuscope's name and role say more than nsys's "python")."""
    p = tl.processes
    hit = np.flatnonzero(p.pid == pe.pid)
    if len(hit):
        p.source[hit] |= 1 << T.SOURCE_GPUSCOPE
        p.name_id[hit[0]] = tl.strings.intern(_process_label(pe))
        return
    tl.processes = T.Processes.concat([p, T.Processes(
        pid=T.column("pid", [pe.pid]), name_id=T.column("name_id", [tl.strings.intern(_process_label(pe))]),
        source=T.column("source", [1 << T.SOURCE_GPUSCOPE]))])


def _add_threads(tl: T.Timeline, threads: dict) -> None:
    have = set(zip(tl.threads.pid.tolist(), tl.threads.tid.tolist()))
    new = [k for k in threads if k not in have]
    if new:
        tl.threads = T.Threads.concat([tl.threads, T.Threads(
            pid=T.column("pid", [k[0] for k in new]), tid=T.column("tid", [k[1] for k in new]),
            name_id=T.column("name_id", [-1] * len(new)))])


def _add_domains(tl: T.Timeline, domains: dict) -> None:
    have = set(zip(tl.domains.pid.tolist(), tl.domains.domain_id.tolist()))
    new = [(pid, did, name) for (pid, name), did in domains.items() if (pid, did) not in have]
    if new:
        tl.domains = T.Domains.concat([tl.domains, T.Domains(
            pid=T.column("pid", [n[0] for n in new]), domain_id=T.column("domain_id", [n[1] for n in new]),
            name_id=T.column("name_id", [tl.strings.intern(n[2]) for n in new]),
            count=T.column("count", [1] * len(new)))])


def timeline_from_events(logs: list) -> T.Timeline:
    """A Timeline of gpuscope's own records only (runs without nsys); t = 0 at the first process start."""
    tl = T.Timeline()
    if logs:
        first = min(logs, key=lambda pe: int(pe.header["anchor_mono_ns"]))
        tl.mono_base_ns = int(first.header["anchor_mono_ns"])
        tl.wall_base_ns = int(first.header["anchor_wall_ns"])
        add_process_events(tl, logs)
        ends = [int(tl.ranges.end_ns.max())] if len(tl.ranges) else []
        ends += [pe.end_ns - tl.mono_base_ns for pe in logs if pe.end_ns]
        tl.duration_ns = max(ends) if ends else None
    return tl


# --------------------------------------------------------------------------- coverage

FIX_FORK = ("use the spawn start method (gpuscope run --start-method spawn), or record fork children with "
            "nsys --trace-fork-before-exec=true plus gpuscope's per-process NVTX re-registration (gpuscope run --nsys)")
FIX_FORK_HANDLES = ("let gpuscope re-register NVTX strings in each child (gpuscope run --nsys does), or use spawn: "
                    "nsys drops a fork child's events that use string handles registered before the fork")
FIX_FLUSH = "let the process exit normally (pool.close(); pool.join(); no os._exit/terminate) so nsys can flush"
FIX_NVTX = "install nvtx<=0.2.11 or a newer Nsight Systems (see `gpuscope doctor`)"


def _forked(pe) -> bool:
    return bool(pe.header.get("forked") or pe.info.get("forked"))


# nsys diagnostics (nsys/diagnostics.py) that mean nsys rejected the program's nvtx package
NVTX_REJECTED = ("nvtx-incompatible", "nvtx-domain-only")


def _nvtx_incompatible(findings: list) -> str | None:
    """The title of nsys's diagnostic that it rejected this nvtx (findings or their dicts), by code."""
    for f in findings:
        code = f.get("code") if isinstance(f, dict) else getattr(f, "code", None)
        if code in NVTX_REJECTED:
            title = (f.get("title") or f.get("message")) if isinstance(f, dict) else getattr(f, "title", None)
            return str(title or "nvtx and nsys are incompatible")
    return None


def _why_missing(pe, fork_flag: bool | None, findings: list) -> tuple[str, str, Fix | None]:
    """(reason, fix text, structured fix) for a process whose ranges nsys lacks."""
    incompatible = _nvtx_incompatible(findings)
    if incompatible:
        return f"nsys rejected this nvtx: {incompatible}", FIX_NVTX, None
    if _forked(pe):
        if fork_flag:
            return ("forked without exec; nsys traced it (--trace-fork-before-exec=true) but discarded "
                    "ranges whose NVTX strings were registered before the fork"), FIX_FORK_HANDLES, \
                SetStartMethod("spawn")
        flag = "off" if fork_flag is False else "not known to be on"
        # fork tracing keeps the start method: the least invasive change
        return (f"forked without exec (start method {pe.start_method or 'fork'}); nsys does not trace fork "
                f"children unless --trace-fork-before-exec=true (it was {flag})"), FIX_FORK, SetNsysForkTracing(True)
    if pe.exit is None:
        return ("exited without a normal shutdown (no exit record), so nsys could not flush its buffers",
                FIX_FLUSH, None)
    return "nsys kept no ranges of this process; cause unknown (see the report's diagnostics)", FIX_FLUSH, None


def compute_coverage(tl: T.Timeline | None, logs: list, findings: list | None = None,
                     fork_flag: bool | None = None, nsys_counts: dict[int, int] | None = None) -> Coverage:
    """Per process of the run (event logs) and per nsys-only process: did nsys keep its ranges?

    ``nsys_counts`` (nsys ranges per pid, as a report's process table has them) stands in for
    ``tl``, so coverage needs no Timeline.
    """
    findings = findings or []
    if nsys_counts is None:
        nsys_counts = tl.range_counts(T.SOURCE_NSYS) if tl is not None else {}
    cov = Coverage(fork_flag=fork_flag)
    for pe in logs:
        g, n = len(pe.ranges) + len(pe.marks), nsys_counts.get(pe.pid, 0)
        g_ranges = len(pe.ranges)
        pc = ProcessCoverage(pid=pe.pid, role=pe.role, start_method=pe.start_method, forked=_forked(pe),
                             gpuscope_ranges=g_ranges, nsys_ranges=n, status="ok")
        if g == 0 and n == 0:
            pc.status, pc.reason = "no-ranges", "made no NVTX calls"
        elif n == 0 and g_ranges > 0:
            pc.status, pc.lost = "missing", g_ranges
            pc.reason, pc.fix, pc.action = _why_missing(pe, fork_flag, findings)
        elif n < g_ranges:
            pc.status, pc.lost = "partial", g_ranges - n
            pc.reason, pc.fix, pc.action = _why_missing(pe, fork_flag, findings)
            pc.reason = f"nsys has {n} of {g_ranges} ranges; likely: {pc.reason}"
        cov.processes.append(pc)
    logged = {pe.pid for pe in logs}
    for pid, n in sorted(nsys_counts.items()):
        if pid not in logged:
            cov.processes.append(ProcessCoverage(pid=pid, role="unknown", start_method=None, forked=False,
                                                 gpuscope_ranges=0, nsys_ranges=n, status="nsys-only",
                                                 reason="no gpuscope event log (not reached by the startup hook)"))
    return cov


MISSED = "nsys-missed-ranges"     # the finding of processes whose ranges nsys did not keep


def coverage_findings(cov: Coverage | None, nsys_findings: list | None = None) -> list[Finding]:
    """Coverage and nsys's diagnostics as findings: one per group of processes nsys missed for the same
    reason (those with a known cause first: their fix is the one "Apply" offers), then the diagnostics
    (findings or their dicts)."""
    out: list[Finding] = []
    groups: dict[tuple, list[ProcessCoverage]] = {}
    for p in sorted(cov.missing if cov is not None else [], key=lambda p: not p.forked):
        groups.setdefault((p.status, p.role, p.start_method, p.reason, p.fix, p.action), []).append(p)
    for (status, role, method, reason, fix, action), procs in groups.items():
        pids = ", ".join(f"pid {p.pid}" for p in procs)
        kept = ", ".join(f"{p.nsys_ranges} of {p.gpuscope_ranges}" for p in procs)
        shown = ["their ranges are drawn from gpuscope's own records (hatched, marked gpuscope)"] \
            if status == "missing" else []
        out.append(Finding(
            MISSED, f"{pids} ({role}, {method or '?'}): nsys has {kept} ranges — {reason or ''}",
            fix or "", Severity.WARNING, tuple(p.pid for p in procs),
            evidence({"processes": len(procs), "ranges in nsys": sum(p.nsys_ranges for p in procs),
                      "ranges gpuscope recorded": sum(p.gpuscope_ranges for p in procs)}, shown,
                     [p.pid for p in procs]), action, None, "nsys"))
    out += [f if isinstance(f, Finding) else Finding.from_dict({**f, "source": "nsys"})
            for f in nsys_findings or []]
    return out


def fork_flag_of_run(run_dir: Path) -> bool | None:
    """Whether nsys recorded the run with --trace-fork-before-exec=true, from spec.json.

    True/False when the recorded nsys command line or the spec's ``nsys.trace_fork`` says so;
    None when unknown (no spec, or nsys was not started by gpuscope).
    """
    try:
        spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = json.dumps(spec)
    if "--trace-fork-before-exec=true" in text:
        return True
    nsys = (spec.get("spec") or spec).get("nsys") if isinstance(spec, dict) else None
    if isinstance(nsys, dict) and nsys.get("enabled"):
        return bool(nsys.get("trace_fork")) if nsys.get("trace_fork") is not None else None
    return None


def attach_run(report, run_dir: Path) -> None:
    """Add coverage and the merged ranges of a gpuscope run to an nsys ``Report`` (in place).

    When nsys kept every process's ranges, nothing needs the Timeline: coverage comes from the
    process table's counts, the processes are named from the logs at once, and the Timeline, when
    it is read, gets the same names (``report.loader`` is wrapped). A report still shows its tables
    before its timeline. Only a run whose processes nsys missed merges their ranges now.
    """
    from gpuscope.trace import summary

    logs = read_events(run_dir)
    counts = {int(p["pid"]): int(p["nvtx_ranges"]) for p in report.processes}
    cov = compute_coverage(None, logs, report.findings, fork_flag_of_run(run_dir), nsys_counts=counts)
    missed = {p.pid for p in cov.processes if p.status == "missing"}
    report.coverage = cov
    if missed:
        added = add_process_events(report.timeline, logs, missed)
        # the NVTX summary covers what the timeline draws: nsys's rows (equal to `nsys stats`), then
        # gpuscope's records of the processes nsys missed as rows of their own, marked
        report.summaries["nvtx"] = summary.run_nvtx_summary(report.timeline, report.naming)
        report.notes.append(f"the NVTX summary adds {added:,} range(s) of {len(missed)} process(es) nsys did not "
                            f"record, from gpuscope's own records (rows marked \"{summary.RECORD_MARK}\"; "
                            "the other rows are nsys stats')")
        report.processes = summary.process_table(report.timeline)
        return
    if report.loaded is not None:   # still name the processes from the logs
        for pe in logs:
            _add_process(report.loaded, pe)
        report.processes = summary.process_table(report.loaded)
        return
    report.processes = named_processes(report.processes, logs)
    inner = report.loader

    def load() -> T.Timeline:
        tl = inner() if inner is not None else T.Timeline()
        for pe in logs:
            _add_process(tl, pe)
        return tl

    report.loader = load


def named_processes(rows: list[dict], logs: list) -> list[dict]:
    """The process table as ``_add_process`` on the Timeline would leave it: each logged process
    named from its log and marked as seen by gpuscope; logged processes nsys lacks appended."""
    out = [dict(r) for r in rows]
    by_pid = {r["pid"]: r for r in out}
    counts = [k for k in (rows[0] if rows else {}) if k not in ("pid", "name", "sources")] or [
        "nvtx_ranges", "gpuscope_ranges", "marks", "kernels", "memops", "cuda_api_calls", "osrt_calls", "threads"]
    for pe in logs:
        row = by_pid.get(pe.pid)
        if row is None:
            row = {"pid": pe.pid, "name": None, "sources": [], **{k: 0 for k in counts}}
            by_pid[pe.pid] = row
            out.append(row)
        row["name"] = _process_label(pe)
        have = set(row["sources"]) | {T.SOURCE_NAMES[T.SOURCE_GPUSCOPE]}
        row["sources"] = [n for n in T.SOURCE_NAMES if n in have]
    return out


def find_export(run_dir: Path) -> Path | None:
    """The run folder's nsys export (gpuscope.rundir.find_export), as a Path."""
    from gpuscope.rundir import find_export as find

    found = find(run_dir)
    return Path(found) if found is not None else None
