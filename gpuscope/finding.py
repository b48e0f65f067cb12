"""Typed findings: what is wrong, the evidence, and the fix (text plus an optional structured action).

A :class:`Finding` round-trips through JSON (``Finding.from_dict(f.to_dict()) == f``), and
``Finding(**f.to_dict())`` rebuilds it too (dicts become the typed parts), so caches and the run
folder's ``findings.json`` keep one format. The structured fix (``action``, a
:mod:`gpuscope.fix` type) is what "Apply fix" uses: rewording ``fix`` text never changes what the
button does.

"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

if TYPE_CHECKING:
    from gpuscope.fix import Fix

__all__ = ["Evidence", "Finding", "Severity", "evidence", "merge", "now_ns", "replace"]


class Severity(str, enum.Enum):
    """How bad it is; a str so ``severity == "error"`` reads naturally."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    def __str__(self) -> str:   # f-strings give the text on every Python version
        return self.value

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


# -- evidence ----------------------------------------------------------------------------------------

class Evidence(NamedTuple):
    """Why a finding was made: measured numbers, the processes involved, excerpts of output."""

    numbers: tuple[tuple[str, float], ...] = ()      # (what, value) in display order
    excerpts: tuple[str, ...] = ()                   # lines of output, stacks, thread names
    pids: tuple[int, ...] = ()

    def number(self, name: str, default: float | None = None) -> float | None:
        return next((v for k, v in self.numbers if k == name), default)

    def to_dict(self) -> dict[str, Any]:
        return {"numbers": dict(self.numbers), "excerpts": list(self.excerpts), "pids": list(self.pids)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Evidence":
        data = data or {}
        numbers = data.get("numbers") or {}
        pairs = numbers.items() if isinstance(numbers, dict) else numbers
        return cls(tuple((str(k), float(v)) for k, v in pairs), tuple(str(x) for x in data.get("excerpts") or ()),
                   tuple(int(p) for p in data.get("pids") or ()))


def evidence(numbers: dict[str, float] | None = None, excerpts: Iterable[str] = (),
             pids: Iterable[int] = ()) -> Evidence:
    """Build :class:`Evidence` from a dict (insertion order is display order)."""
    return Evidence(tuple((k, float(v)) for k, v in (numbers or {}).items()),
                    tuple(excerpts), tuple(sorted(set(int(p) for p in pids))))


# -- the finding -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One problem: a stable ``code``, what happened (``title``), evidence, and what to do (``fix``)."""

    code: str
    title: str
    fix: str = ""
    severity: Severity = Severity.WARNING
    pids: tuple[int, ...] = ()
    evidence: Evidence = Evidence()
    action: Fix | None = None
    first_seen_ns: int | None = None            # wall clock (epoch ns) when first seen, None = after the run
    source: str = "run"                         # run | nsys | live

    def __post_init__(self) -> None:
        # Accept the JSON forms too, so Finding(**finding.to_dict()) rebuilds the typed object.
        object.__setattr__(self, "severity", Severity(self.severity))
        object.__setattr__(self, "pids", tuple(int(p) for p in self.pids))
        if isinstance(self.evidence, dict):
            object.__setattr__(self, "evidence", Evidence.from_dict(self.evidence))
        if isinstance(self.action, dict):
            object.__setattr__(self, "action", _fix_from_dict(self.action))

    # Older names (nsys diagnostics, the report view): the same text.
    @property
    def message(self) -> str:
        return self.title

    @property
    def advice(self) -> str:
        return self.fix

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity.value, "title": self.title, "fix": self.fix,
                "pids": list(self.pids), "evidence": self.evidence.to_dict(),
                "action": _fix_to_dict(self.action) if self.action is not None else None,
                "first_seen_ns": self.first_seen_ns, "source": self.source}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        return cls(code=str(data["code"]), title=str(data.get("title", data.get("message", ""))),
                   fix=str(data.get("fix", data.get("advice", "")) or ""),
                   severity=Severity(data.get("severity", "warning")), pids=tuple(data.get("pids") or ()),
                   evidence=Evidence.from_dict(data.get("evidence")), action=_fix_from_dict(data.get("action")),
                   first_seen_ns=data.get("first_seen_ns"), source=str(data.get("source", "run")))

    def line(self) -> str:
        """One line for a terminal: ``warning [code] title``."""
        return f"{self.severity.value} [{self.code}] {self.title}"


def _fix_to_dict(fix: Fix) -> dict[str, Any]:
    from gpuscope.fix import fix_to_dict   # the fix types load for a finding that has one, not for every run

    return fix_to_dict(fix)


def _fix_from_dict(data: dict[str, Any] | None) -> Fix | None:
    if not data:
        return None
    from gpuscope.fix import fix_from_dict   # as in _fix_to_dict

    return fix_from_dict(data)


def now_ns() -> int:
    return time.time_ns()


def merge(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per code and pid set: a later one (recomputed from more data) replaces an earlier
    one but keeps its first-seen time; errors first, then by first seen."""
    seen: dict[tuple[str, tuple[int, ...]], Finding] = {}
    for f in findings:
        key = (f.code, f.pids)
        old = seen.get(key)
        if old is not None and old.first_seen_ns is not None:
            first = min(old.first_seen_ns, f.first_seen_ns or old.first_seen_ns)
            f = replace(f, first_seen_ns=first, evidence=f.evidence if f.evidence.excerpts or not old.evidence.excerpts
                        else f.evidence._replace(excerpts=old.evidence.excerpts))
        seen[key] = f
    return sorted(seen.values(), key=lambda f: (-f.severity.rank, f.first_seen_ns or 0, f.code))
