"""Data types of the cleanup API: identities, reasons, evidence, suspects, scan and action results.

Everything here is plain data (stdlib only) with a ``to_dict()`` for ``--json`` and the app's table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator, Union

# Reason codes (stable strings: the app may filter or colour by them).
IDLE_GPU = "idle-gpu-holder"
RUN_LEFTOVER = "run-leftover"
ORPHAN_WORKER = "orphan-worker"
ZOMBIE = "zombie"
LEAKED_SHM = "leaked-shm"
LEAKED_SEM = "leaked-semaphore"   # a named semaphore (/dev/shm/sem.*), judged like a segment
STALE_NSYS_AGENT = "stale-nsys-agent"
GPU_DEAD_PID = "gpu-memory-dead-pid"
GPU_PID_MISMATCH = "gpu-pid-not-here"

# Suspect kinds: what the target is, which decides the actions it offers.
KIND_PROCESS = "process"
KIND_ZOMBIE = "zombie"
KIND_SHM = "shm"
KIND_GPU_GHOST = "gpu-ghost"

# Action names.
TERMINATE = "terminate"        # SIGTERM, grace period, then SIGKILL
KILL = "kill"                  # SIGKILL at once
SIGNAL_PARENT = "signal-parent"  # SIGCHLD to a zombie's parent
UNLINK = "unlink"              # remove a /dev/shm segment or named semaphore


@dataclass(frozen=True)
class ProcIdentity:
    """A process as it was listed: a pid is only ever signalled while its create time still matches."""

    pid: int
    create_time: float

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "create_time": self.create_time}

    def __str__(self) -> str:
        return f"{self.pid}:{self.create_time:.2f}"


@dataclass(frozen=True)
class ShmIdentity:
    """A /dev/shm segment (or named semaphore) as it was listed (a new file with the same name has another inode)."""

    name: str
    dev: int
    ino: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dev": self.dev, "ino": self.ino}

    def __str__(self) -> str:
        return f"/dev/shm/{self.name}"


@dataclass(frozen=True)
class Reason:
    """Why something is listed: a stable code and a one-line explanation with the numbers."""

    code: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "text": self.text}


class _Fields:
    """Read access by field name for displays that list every field (``items()``, ``get``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Any:
        """The evidence :meth:`to_dict` made (a remote agent's listing); unknown keys ignored."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in names})

    def items(self) -> Iterator[tuple[str, Any]]:
        return ((f.name, getattr(self, f.name)) for f in fields(self))  # type: ignore[arg-type]

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None


@dataclass
class ProcessEvidence(_Fields):
    """What a user needs to judge a live process or a zombie (numbers, not prose)."""

    pid: int
    ppid: int
    parent: str | None               # "name (pid N)" of its parent, when it exists
    user: str
    uid: int | None
    name: str
    cmdline: str
    create_time: float
    age_s: float | None
    state: str                       # sleeping, running, zombie, ...
    session: int
    threads: int
    cpu_percent: float | None        # between the last two observations
    cpu_time_s: float
    rss_bytes: int
    gpu_memory_bytes: int | None
    gpu_devices: list[int]
    last_ran_s_ago: float | None
    last_activity: str
    run_id: str | None = None        # the finished gpuscope run it came from
    run_status: str | None = None
    parent_cmdline: str | None = None    # zombies: who should reap it
    zombie_seen_s: float | None = None   # zombies: how long it has been seen unreaped


@dataclass
class ShmEvidence(_Fields):
    """A /dev/shm segment no live process uses."""

    name: str
    path: str
    owner: str
    uid: int
    size_bytes: int
    allocated_bytes: int             # what it holds in RAM
    modified_s_ago: float
    accessed_s_ago: float
    creator: str | None              # who usually makes such names
    dev: int
    ino: int
    resource_trackers: list[int] = field(default_factory=list)  # live trackers that may unlink it
    semaphore: bool = False          # a named semaphore (sem.NAME) rather than a segment
    run_id: str | None = None        # the gpuscope run whose process created it (its event logs)
    creator_pid: int | None = None   # that process
    created_at: str | None = None    # the user's file:line that created it


@dataclass
class GpuGhostEvidence(_Fields):
    """GPU memory NVML accounts to a pid that is not a GPU user here."""

    pid: int
    gpu_memory_bytes: int
    gpu_devices: list[int]


Evidence = Union[ProcessEvidence, ShmEvidence, GpuGhostEvidence]


@dataclass
class Suspect:
    """One row of the cleanup list: a process, a zombie, a shm segment or orphaned GPU memory.

    ``actions`` are the actions that make sense for it (first = default); ``blocked`` is the
    safety verdict at listing time (a one-line refusal, or None when gpuscope may act);
    ``advice`` says what to do when no action of gpuscope's can help.
    """

    key: str
    kind: str
    title: str
    reasons: list[Reason] = field(default_factory=list)
    evidence: Evidence | None = None
    identity: ProcIdentity | ShmIdentity | None = None
    actions: list[str] = field(default_factory=list)
    blocked: str | None = None
    advice: str | None = None

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    @property
    def pid(self) -> int | None:
        return self.identity.pid if isinstance(self.identity, ProcIdentity) else None

    @property
    def run_id(self) -> str | None:
        """The finished run a process came from (None for other kinds)."""
        return self.evidence.run_id if isinstance(self.evidence, ProcessEvidence) else None

    def add_reason(self, code: str, text: str) -> None:
        if all(r.code != code for r in self.reasons):
            self.reasons.append(Reason(code, text))

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "title": self.title,
            "reasons": [r.to_dict() for r in self.reasons],
            "evidence": self.evidence.to_dict() if self.evidence is not None else {},
            "identity": self.identity.to_dict() if self.identity else None,
            "actions": list(self.actions),
            "blocked": self.blocked,
            "advice": self.advice,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Suspect:
        """The suspect :meth:`to_dict` made (a remote agent's listing)."""
        kind = str(d.get("kind"))
        ident = d.get("identity")
        identity: ProcIdentity | ShmIdentity | None = None
        if isinstance(ident, dict):
            identity = (ShmIdentity(ident["name"], int(ident["dev"]), int(ident["ino"])) if kind == KIND_SHM
                        else ProcIdentity(int(ident["pid"]), float(ident["create_time"])))
        ev = d.get("evidence") or None
        cls_ev: type[_Fields] = {KIND_SHM: ShmEvidence, KIND_GPU_GHOST: GpuGhostEvidence}.get(kind, ProcessEvidence)
        return cls(key=str(d["key"]), kind=kind, title=str(d.get("title", "")),
                   reasons=[Reason(r["code"], r["text"]) for r in d.get("reasons") or []],
                   evidence=cls_ev.from_dict(ev) if isinstance(ev, dict) else None, identity=identity,
                   actions=list(d.get("actions") or []), blocked=d.get("blocked"), advice=d.get("advice"))


@dataclass
class ScanResult:
    """A listing: suspects plus notes said once (GPU checks skipped, PID 1 does not reap, ...)."""

    suspects: list[Suspect]
    notes: list[str]
    scanned_at: float
    gpu_checked: bool
    gpu_skip_reason: str | None
    observed_s: float

    def by_pid(self, pid: int) -> Suspect | None:
        return next((s for s in self.suspects if s.pid == pid), None)

    def by_shm(self, name: str) -> Suspect | None:
        return next((s for s in self.suspects
                     if isinstance(s.identity, ShmIdentity) and s.identity.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scanned_at": self.scanned_at,
            "observed_s": round(self.observed_s, 3),
            "gpu_checked": self.gpu_checked,
            "gpu_skip_reason": self.gpu_skip_reason,
            "notes": list(self.notes),
            "suspects": [s.to_dict() for s in self.suspects],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScanResult:
        """The listing :meth:`to_dict` made (a remote agent's ``cleanup_scan``)."""
        return cls([Suspect.from_dict(s) for s in d.get("suspects") or []], list(d.get("notes") or []),
                   float(d.get("scanned_at") or 0.0), bool(d.get("gpu_checked")), d.get("gpu_skip_reason"),
                   float(d.get("observed_s") or 0.0))


@dataclass
class ActionResult:
    """What one action did. ``ok`` is False for refusals and failures; ``message`` is one line."""

    action: str
    target: str
    identity: dict[str, Any]
    result: str          # done | gone | refused | failed | advice | not-reaped
    ok: bool
    message: str
    final_state: str | None = None
    freed: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ActionResult:
        """The result :meth:`to_dict` made (a remote agent's ``cleanup_apply``)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
