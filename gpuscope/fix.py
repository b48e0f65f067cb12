"""The structured fixes a finding offers: what "Apply fix" does, never read back from the fix's text.

A :class:`gpuscope.finding.Finding` holds one in ``action``; each rule makes the one it offers
where it decides, importing it from here (a run whose findings offer none does not load this
module). ``fix_to_dict`` / ``fix_from_dict`` give the JSON form a finding's ``to_dict`` keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Union


@dataclass(frozen=True)
class SetStartMethod:
    """Run again with this multiprocessing start method."""

    method: str
    kind: str = field(default="set-start-method", init=False)


@dataclass(frozen=True)
class SetNsysForkTracing:
    """Record under nsys with ``--trace-fork-before-exec`` on (or off)."""

    on: bool = True
    kind: str = field(default="nsys-fork-tracing", init=False)


@dataclass(frozen=True)
class SetForkserverPreload:
    """Run again with the forkserver start method, its server importing these modules once
    (``multiprocessing.set_forkserver_preload``): workers fork from it with them loaded."""

    modules: tuple[str, ...]
    kind: str = field(default="forkserver-preload", init=False)


@dataclass(frozen=True)
class CleanupPids:
    """Stop these leftover processes (the Cleanup tab / ``gpuscope cleanup``)."""

    pids: tuple[int, ...]
    kind: str = field(default="cleanup-pids", init=False)


@dataclass(frozen=True)
class CleanupShm:
    """Unlink these leftover /dev/shm segments."""

    names: tuple[str, ...]
    kind: str = field(default="cleanup-shm", init=False)


@dataclass(frozen=True)
class StopRun:
    """Stop the run now (it will not finish by itself)."""

    kind: str = field(default="stop-run", init=False)


FIX_TYPES = (SetStartMethod, SetNsysForkTracing, SetForkserverPreload, CleanupPids, CleanupShm, StopRun)
Fix = Union[SetStartMethod, SetNsysForkTracing, SetForkserverPreload, CleanupPids, CleanupShm, StopRun]
FIX_KINDS: dict[str, type[Fix]] = {str(c.__dataclass_fields__["kind"].default): c for c in FIX_TYPES}


def fix_to_dict(fix: Fix) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": fix.kind}
    for f in fields(fix):
        if f.name != "kind":
            value = getattr(fix, f.name)
            data[f.name] = list(value) if isinstance(value, tuple) else value
    return data


def fix_from_dict(data: dict[str, Any] | None) -> Fix | None:
    """The typed fix of a dict (``None`` for none or an unknown kind from a newer gpuscope)."""
    if not data:
        return None
    cls = FIX_KINDS.get(str(data.get("kind")))
    if cls is None:
        return None
    args: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "kind"}
    return cls(**args)
