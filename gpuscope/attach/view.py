"""What an attached session shows at one moment: its processes, findings, stacks and refusals.

:meth:`AttachView.to_json` is the shape ``gpuscope attach --json`` prints (docs/ATTACH.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.attach.access import Refusal
    from gpuscope.attach.profile import Profile
    from gpuscope.attach.stacks import TreeStacks
    from gpuscope.finding import Finding


@dataclass
class AttachedProcess:
    """One process of the attached tree, as last seen."""

    pid: int
    ppid: int
    role: str
    rank: int | None
    cmdline: tuple[str, ...]
    cpu_s: float
    rss_bytes: int
    gpu_mem_bytes: int | None
    state: str                       # running, sleeping, zombie, ... ; "ended" once gone
    start_method: str | None = None
    alive: bool = True
    python: bool = True
    start_ticks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "ppid": self.ppid, "role": self.role, "rank": self.rank,
                "cmdline": list(self.cmdline), "cpu_s": round(self.cpu_s, 3), "rss_bytes": self.rss_bytes,
                "gpu_mem_bytes": self.gpu_mem_bytes, "state": self.state, "start_method": self.start_method,
                "alive": self.alive}


@dataclass
class AttachView:
    """The attached tree now (``ended``: nothing of it runs any more)."""

    run_id: str
    root_pid: int
    processes: list[AttachedProcess] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    stacks: TreeStacks | None = None
    refused: list[Refusal] = field(default_factory=list)
    ended: bool = False
    profile: Profile | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id, "root_pid": self.root_pid, "ended": self.ended,
            "processes": [p.to_dict() for p in self.processes],
            "findings": [f.to_dict() for f in self.findings],
            "stacks": self.stacks.to_dict() if self.stacks is not None else None,
            "refused": [r.to_dict() for r in self.refused],
            "notes": list(self.notes),
        }
        if self.profile is not None:
            out["profile"] = self.profile.to_dict()
        return out

    def process(self, pid: int) -> AttachedProcess | None:
        return next((p for p in self.processes if p.pid == pid), None)
