"""The typed record of one run: what it was, its processes, findings and nsys result.

:class:`RunRecord` is the one shape a run has after it ended (``gpuscope run`` returns it, the
run folder keeps it as ``summary.json``, :func:`gpuscope.store.lookup.open_run` reads it back). Its
JSON form (``to_json``) is what ``gpuscope run --json`` prints; docs/STORE.md says which file
holds what. This module is light (dataclasses and the status enum): ``gpuscope run`` imports it
before the program starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuscope.status import ExitStatus, RunStatus
from gpuscope.trace.process_row import ProcessRow, SampledProcess

if TYPE_CHECKING:
    from pathlib import Path

    from gpuscope.finding import Finding
    from gpuscope.procs.key import ProcKey


@dataclass
class NsysSummary:
    """What the nsys recording of a run produced (``gpuscope.nsys.record.NsysResult``, as kept)."""

    ok: bool
    reason: str | None = None
    rep_path: str | None = None
    sqlite_path: str | None = None
    qdstrm_path: str | None = None
    steps: list[tuple[str, float]] = field(default_factory=list)
    nsys_version: str = ""
    nsys_path: str = ""
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reason": self.reason, "nsys_version": self.nsys_version,
                "nsys_path": self.nsys_path, "rep_path": self.rep_path, "sqlite_path": self.sqlite_path,
                "qdstrm_path": self.qdstrm_path, "steps": [[name, round(sec, 3)] for name, sec in self.steps],
                "findings": [f.to_dict() for f in self.findings]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NsysSummary:
        findings = data.get("findings") or []
        if findings:
            from gpuscope.finding import Finding

            findings = [f if not isinstance(f, dict) else Finding.from_dict(f) for f in findings]
        return cls(ok=bool(data.get("ok")), reason=data.get("reason"), rep_path=_text(data.get("rep_path")),
                   sqlite_path=_text(data.get("sqlite_path")), qdstrm_path=_text(data.get("qdstrm_path")),
                   steps=[(str(s[0]), float(s[1])) for s in data.get("steps") or ()],
                   nsys_version=str(data.get("nsys_version") or ""), nsys_path=str(data.get("nsys_path") or ""),
                   findings=list(findings))

    @classmethod
    def of(cls, result: Any) -> NsysSummary | None:
        """An ``NsysResult`` (anything with ``to_dict``), kept as this record; None stays None."""
        if result is None or isinstance(result, NsysSummary):
            return result
        return cls.from_dict(result.to_dict())


@dataclass
class TorchTraceFile:
    """One torch.profiler trace of the run (``--torch-profile``, docs/TORCH-PROFILER.md).

    ``path`` is relative to the run folder. A profiler timestamp (``baseTimeNanoseconds`` + ``ts``
    µs × 1000) plus ``clock_offset_ns`` is gpuscope's clock (CLOCK_MONOTONIC ns, the event logs'),
    within ``clock_uncertainty_ns``; ``source``: ``gpuscope`` (its profiler) or ``program`` (a trace
    the program exported itself); ``events``: the profiler's events (None: not counted)."""

    path: str
    pid: int
    rank: int | None = None
    events: int | None = None
    clock_offset_ns: int | None = None
    clock_uncertainty_ns: int | None = None
    clock_method: str | None = None      # marker | realtime (docs/TORCH-PROFILER.md)
    source: str = "gpuscope"
    cycle: int = 1                       # the schedule's cycle (1 without a schedule)
    role: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "pid": self.pid, "rank": self.rank, "events": self.events,
                "clock_offset_ns": self.clock_offset_ns, "clock_uncertainty_ns": self.clock_uncertainty_ns,
                "clock_method": self.clock_method, "source": self.source, "cycle": self.cycle, "role": self.role}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TorchTraceFile:
        def num(key: str) -> int | None:
            value = d.get(key)
            return None if value is None else int(value)

        return cls(path=str(d.get("path") or ""), pid=int(d.get("pid") or 0), rank=num("rank"),
                   events=num("events"), clock_offset_ns=num("clock_offset_ns"),
                   clock_uncertainty_ns=num("clock_uncertainty_ns"), clock_method=_text(d.get("clock_method")),
                   source=str(d.get("source") or "gpuscope"), cycle=int(d.get("cycle") or 1),
                   role=_text(d.get("role")))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass
class RunRecord:
    """One run: status, exit, its processes (typed rows), notes, findings and nsys result.

    ``ended_ns`` is 0 while the run runs. ``spec`` and ``versions`` come from the folder's
    ``spec.json`` (empty where the record was made in memory without them)."""

    run_id: str
    run_folder: str          # the run's folder (``run_dir``: as a Path)
    status: RunStatus
    exit: ExitStatus
    started_ns: int
    ended_ns: int
    processes: list[ProcessRow] = field(default_factory=list)
    left_running: list[int] = field(default_factory=list)   # alive after a run that ended by itself
    escaped: list[int] = field(default_factory=list)        # left the session (double fork, setsid)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    nsys: NsysSummary | None = None
    findings: list[Finding] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    kind: str = "run"        # "run": gpuscope started it; "attached": gpuscope attach followed it
    sampled: list[SampledProcess] = field(default_factory=list)   # the sampler's view of each process
    torch_traces: list[TorchTraceFile] = field(default_factory=list)   # --torch-profile

    @property
    def run_dir(self) -> Path:
        from gpuscope.paths import as_path

        return as_path(self.run_folder)

    @property
    def duration_s(self) -> float | None:
        if not self.ended_ns or not self.started_ns:
            return None
        return (self.ended_ns - self.started_ns) / 1e9

    def describe(self) -> str:
        """"exited (exit code 0)", "failed (killed by SIGKILL)", "stopped", ... (:class:`RunStatus`)."""
        return self.status.describe(self.exit, self.error)

    def process(self, key: ProcKey | int) -> ProcessRow | None:
        """The row of one process, by its key (pid + start ticks) or, where the row has no start
        ticks (older logs, processes only the sampler saw), by its pid."""
        pid = key if isinstance(key, int) else key.pid
        for row in self.processes:
            if row.pid != pid:
                continue
            if isinstance(key, int) or row.start_ticks is None or row.start_ticks == key.start:
                return row
        return None

    def to_json(self) -> dict[str, Any]:
        """The JSON form: ``summary.json`` and ``gpuscope run --json``."""
        return {
            "run_id": self.run_id,
            "status": self.status.value,
            "exit_code": self.exit.code,
            "signal": self.exit.signal,
            "run_dir": self.run_folder,
            "duration_s": round((self.ended_ns - self.started_ns) / 1e9, 3) if self.ended_ns else None,
            "processes": [row.to_dict() for row in self.processes],
            "left_running": self.left_running,
            "escaped": self.escaped,
            "notes": self.notes,
            "error": self.error,
            "nsys": self.nsys.to_dict() if self.nsys is not None else None,
            "findings": [f.to_dict() for f in self.findings],
            "started_ns": self.started_ns,
            "ended_ns": self.ended_ns or None,
            "torch_traces": [t.to_dict() for t in self.torch_traces],
            "kind": self.kind,
            "sampled": [t.to_dict() for t in self.sampled],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], run_folder: str, started_ns: int = 0,
                  spec: dict[str, Any] | None = None, versions: dict[str, Any] | None = None) -> RunRecord:
        """A record from its JSON form. ``started_ns``: when the run started, for a summary written
        before it kept its times (only the duration: the end is the start plus the duration)."""
        started_ns = int(data.get("started_ns") or started_ns)
        duration = data.get("duration_s")
        ended = int(data.get("ended_ns") or 0)
        if not ended and duration is not None:
            ended = started_ns + int(float(duration) * 1e9)
        findings = data.get("findings") or []
        if findings:
            from gpuscope.finding import Finding

            findings = [Finding.from_dict(f) for f in findings if isinstance(f, dict)]
        nsys = data.get("nsys")
        return cls(run_id=str(data.get("run_id") or ""), run_folder=run_folder,
                   status=RunStatus.parse(data.get("status")),
                   exit=ExitStatus(data.get("exit_code"), data.get("signal")),
                   started_ns=started_ns, ended_ns=ended,
                   processes=[ProcessRow.from_dict(p) for p in data.get("processes") or () if isinstance(p, dict)],
                   left_running=[int(p) for p in data.get("left_running") or ()],
                   escaped=[int(p) for p in data.get("escaped") or ()],
                   notes=[str(n) for n in data.get("notes") or ()], error=data.get("error"),
                   nsys=NsysSummary.from_dict(nsys) if isinstance(nsys, dict) else None,
                   findings=list(findings), spec=dict(spec or {}), versions=dict(versions or {}),
                   torch_traces=[TorchTraceFile.from_dict(t) for t in data.get("torch_traces") or ()
                                 if isinstance(t, dict)],
                   kind=str(data.get("kind") or "run"),
                   sampled=[SampledProcess.from_summary(int(t["pid"]), t) for t in data.get("sampled") or ()
                            if isinstance(t, dict) and isinstance(t.get("pid"), int)])
