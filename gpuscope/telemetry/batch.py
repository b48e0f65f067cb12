"""The immutable samples a sampler hands to its listeners, one :class:`SampleBatch` per tick.

Attribute names are the metric keys of :mod:`gpuscope.telemetry.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, NamedTuple

from gpuscope.telemetry.gpu import DeviceSample, GpuProcessSample

__all__ = ["DeviceSample", "GpuProcessSample", "HostSample", "ProcSample", "SampleBatch", "StartedProc"]


class HostSample(NamedTuple):
    """Host totals at one instant."""

    cpu: float | None                # mean over cores, %
    cores: tuple[float, ...]         # per core, %
    mem_used: int
    mem_total: int
    swap_used: int
    swap_total: int


class ProcSample(NamedTuple):
    """One process of the tree at one instant; ``None`` = not measured."""

    pid: int
    ppid: int
    name: str
    state: str
    cpu: float | None
    rss: int
    uss: int | None
    threads: int
    gpu_mem: int | None
    sm_util: float | None


class StartedProc(NamedTuple):
    """A process seen for the first time: what does not change every tick (the process itself,
    as /proc shows it, is :class:`gpuscope.procs.read.ProcInfo`)."""

    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    create_time: float               # seconds since the epoch (as psutil)
    first_seen_ns: int               # monotonic ns
    via: str                         # why it belongs to the run: a gpuscope.procs.membership.Reason value


class SampleBatch(NamedTuple):
    """Everything sampled in one tick. ``t_ns`` is CLOCK_MONOTONIC (the event logs' clock)."""

    seq: int
    t_ns: int
    wall_ns: int
    host: HostSample | None
    processes: tuple[ProcSample, ...]
    devices: tuple[DeviceSample, ...]
    gpu_processes: tuple[GpuProcessSample, ...]
    started: tuple[StartedProc, ...] = ()
    ended: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A compact JSON form (each part a list in field order: a remote's live stream is small)."""
        return {"seq": self.seq, "t_ns": self.t_ns, "wall_ns": self.wall_ns,
                "host": _row(self.host) if self.host is not None else None,
                "processes": [_row(p) for p in self.processes], "devices": [_row(d) for d in self.devices],
                "gpu_processes": [_row(g) for g in self.gpu_processes],
                "started": [_row(s, exact=True) for s in self.started], "ended": list(self.ended),
                "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SampleBatch:
        """The batch :meth:`to_dict` made."""
        host = d.get("host")
        return cls(seq=int(d["seq"]), t_ns=int(d["t_ns"]), wall_ns=int(d["wall_ns"]),
                   host=_unrow(HostSample, host) if host is not None else None,
                   processes=tuple(_unrow(ProcSample, r) for r in d.get("processes") or ()),
                   devices=tuple(_unrow(DeviceSample, r) for r in d.get("devices") or ()),
                   gpu_processes=tuple(_unrow(GpuProcessSample, r) for r in d.get("gpu_processes") or ()),
                   started=tuple(_unrow(StartedProc, r) for r in d.get("started") or ()),
                   ended=tuple(int(p) for p in d.get("ended") or ()), notes=tuple(d.get("notes") or ()))


def _row(part: Any, exact: bool = False) -> list[Any]:
    """A sample's fields as a list (floats to 1 decimal unless ``exact``: percents, watts, degrees)."""
    out: list[Any] = []
    for value in _values(part):
        if exact:
            value = list(value) if isinstance(value, tuple) else value
        elif isinstance(value, float):
            value = round(value, 1)
        elif isinstance(value, tuple):
            value = [round(v, 1) if isinstance(v, float) else v for v in value]
        out.append(value)
    return out


def _values(part: Any) -> Iterable[Any]:
    """A sample's values in field order (DeviceSample is a dataclass: a field ``index`` would
    shadow ``tuple.index``; the others are named tuples)."""
    return part if isinstance(part, tuple) else (getattr(part, f.name) for f in fields(part))


def _unrow(cls: Any, row: list[Any]) -> Any:
    """The sample :func:`_row` made (lists back to tuples)."""
    return cls(*(tuple(v) if isinstance(v, list) else v for v in row))
