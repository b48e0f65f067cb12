"""The immutable samples a sampler hands to its listeners, one :class:`SampleBatch` per tick.

Attribute names are the metric keys of :mod:`gpuscope.telemetry.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscope.telemetry.gpu import DeviceSample, GpuProcessSample

__all__ = ["DeviceSample", "GpuProcessSample", "HostSample", "ProcSample", "SampleBatch", "StartedProc"]


@dataclass(frozen=True, slots=True)
class HostSample:
    """Host totals at one instant."""

    cpu: float | None                # mean over cores, %
    cores: tuple[float, ...]         # per core, %
    mem_used: int
    mem_total: int
    swap_used: int
    swap_total: int


@dataclass(frozen=True, slots=True)
class ProcSample:
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


@dataclass(frozen=True, slots=True)
class StartedProc:
    """A process seen for the first time: what does not change every tick (the process itself,
    as /proc shows it, is :class:`gpuscope.procs.read.ProcInfo`)."""

    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    create_time: float               # seconds since the epoch (as psutil)
    first_seen_ns: int               # monotonic ns
    via: str                         # why it belongs to the run: a gpuscope.procs.membership.Reason value


@dataclass(frozen=True, slots=True)
class SampleBatch:
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
