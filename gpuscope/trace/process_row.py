"""Typed records of a finished run: one ``ProcessRow`` per process (its JSON form: ``to_dict``).

A row is built once, in :mod:`gpuscope.trace.process_rows`, from the process's event log and the
sampler's figures. ``to_dict()`` is what ``gpuscope run --json``, ``summary.json`` and the store
hold; ``from_dict()`` reads that back (older summaries lack the newer keys: they read as None).

Where a number comes from is said beside it: ``cpu_source`` / ``rss_source`` are ``"exact"``
(the process measured itself at exit, docs/EVENTS.md) or ``"sampled"`` (the 10 Hz sampler: it can
miss a short-lived process, or see only part of its life); ``exit_source`` is ``"process"`` (its
exit record) or ``"launcher"`` (the exit status gpuscope's launcher waited for).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import Any, Literal

    from gpuscope.procs.key import ProcKey

    Source = Literal["exact", "sampled"]

NOT_INJECTED = "not injected"
# Programs that are not Python (gpuscope cannot inject them) known by their OS name: their role.
PROGRAM_ROLES = {"gcs_server": "ray GCS", "raylet": "ray raylet"}


def display_name(role: str | None, worker_id: int | None = None, rank: int | None = None,
                 os_name: str | None = None) -> str:
    """The one name a process is shown by, in every view (Processes, Report lanes, the CLI table):
    its role (``main``, ``pool worker``, ``torchrun agent``, ``rank 1``), a DataLoader worker's id
    (``DataLoader worker #1``), the rank of a process of a rank (``pool worker (rank 1)``; pass no
    rank where a table has a RANK column). A process gpuscope did not reach is named by its program
    (``ray raylet``, ``nsys``). The OS name (comm) is never the name: a program may rename itself
    (torchrun's agent calls its main thread ``pt_elastic``, which renames the process from
    gpuscope's ``gs:agent``)."""
    if not role or role in ("unknown", NOT_INJECTED):
        return PROGRAM_ROLES.get(os_name, os_name) if os_name else (role or "unknown")
    text = role if worker_id is None else f"{role} #{worker_id}"
    if rank is not None and not role.startswith("rank"):
        text += f" (rank {rank})"
    return text


@dataclass(frozen=True)
class TopRange:
    """A range name with its count and total time in one process."""

    name: str
    count: int
    total_ns: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "total_ns": self.total_ns}


@dataclass
class ProcessRow:
    """One process of a run: identity, life, ranges and resources."""

    pid: int
    ppid: int | None = None
    start_ticks: int | None = None          # with the pid, its identity (gpuscope.procs.ProcKey); None: unknown
    role: str = "unknown"
    start_method: str | None = None
    rank: int | None = None
    name: str | None = None                 # the OS name (comm) gpuscope gave it, or the sampler saw
    mp_name: str | None = None              # multiprocessing's Process.name
    exit_code: int | None = None
    clean_exit: bool | None = None          # its exit record was written (None: not injected)
    started_ns: int | None = None           # wall clock, epoch ns
    ended_ns: int | None = None
    lifetime_s: float | None = None
    ranges: int = 0
    marks: int = 0
    range_names: list[str] = field(default_factory=list)
    top_ranges: list[TopRange] = field(default_factory=list)
    injection_errors: int = 0
    log_truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    cpu_seconds: float | None = None        # user + system
    peak_rss_bytes: int | None = None
    peak_gpu_mem_bytes: int | None = None
    cpu_source: Source | None = None
    rss_source: Source | None = None
    cpu_user_seconds: float | None = None   # exact only
    cpu_system_seconds: float | None = None
    exit_source: Literal["process", "launcher", "parent"] | None = None
    exit_how: str | None = None             # end | sys.exit | exception | os._exit | KeyboardInterrupt
    exit_signal: str | None = None          # the signal that ended it, when one did
    worker_id: int | None = None            # a DataLoader / pool worker's index

    @property
    def display_name(self) -> str:
        """The name every view shows for this process (:func:`display_name`)."""
        return display_name(self.role, self.worker_id, self.rank, self.name)

    @property
    def key(self) -> ProcKey | None:
        """The process's identity (pid + start ticks), where its log recorded its start."""
        from gpuscope.procs.key import ProcKey

        return None if self.start_ticks is None else ProcKey(self.pid, self.start_ticks)

    @property
    def injected(self) -> bool:
        return self.role != NOT_INJECTED and self.role not in PROGRAM_ROLES.values()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`run --json`, summary.json, the store)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "top_ranges":
                value = [t.to_dict() for t in value]
            elif f.name in ("range_names", "info"):
                value = type(value)(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessRow:
        """Read a row back; unknown keys are ignored, missing ones take their defaults."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["top_ranges"] = [t if isinstance(t, TopRange) else TopRange(str(t["name"]), int(t["count"]),
                                                                              int(t["total_ns"]))
                                for t in data.get("top_ranges") or []]
        values["range_names"] = list(data.get("range_names") or [])
        values["info"] = dict(data.get("info") or {})
        return cls(**values)


class SampledProcess(NamedTuple):
    """What the telemetry sampler saw of one process (its summary when the run ended)."""

    pid: int
    ppid: int | None = None
    start_ticks: int | None = None          # with the pid, its identity (gpuscope.procs.ProcKey)
    name: str | None = None                 # the OS name (comm) when last seen
    cmdline: tuple[str, ...] = ()           # JSON: a list
    create_time: float | None = None        # epoch seconds, as /proc gives it
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None
    peak_gpu_mem_bytes: int | None = None   # None without GPU telemetry

    @classmethod
    def from_summary(cls, pid: int, data: dict[str, Any]) -> SampledProcess:
        """One entry of the sampler's ``process_summary()``."""
        return cls(pid=int(pid), ppid=data.get("ppid"), start_ticks=data.get("start_ticks"), name=data.get("name"),
                   cmdline=tuple(data.get("cmdline") or ()), create_time=data.get("create_time"),
                   cpu_seconds=data.get("cpu_seconds"), peak_rss_bytes=data.get("peak_rss_bytes"),
                   peak_gpu_mem_bytes=data.get("peak_gpu_mem_bytes"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the record's ``sampled``); :meth:`from_summary` reads it back."""
        return {**self._asdict(), "cmdline": list(self.cmdline)}   # the key keeps its place


def sampled_from_summary(summary: dict[int, dict[str, Any]]) -> list[SampledProcess]:
    """The sampler's ``process_summary()`` as records, by pid."""
    return [SampledProcess.from_summary(pid, data) for pid, data in sorted(summary.items())]


def as_row(value: ProcessRow | dict[str, Any]) -> ProcessRow:
    """A row from either form (callers that still hold JSON dicts)."""
    return value if isinstance(value, ProcessRow) else ProcessRow.from_dict(value)
