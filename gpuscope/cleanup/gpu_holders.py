"""GPU evidence for cleanup: idle GPU-memory holders (from repeated observations) and GPU
memory accounted to pids that do not exist here.

GPU data comes from the telemetry backend (``gpuscope.telemetry.gpu.open_backend``):
``backend.processes()`` gives per-process samples (pid, device_index, used_memory_bytes,
sm_util or None) and ``backend.devices()`` device samples with their utilisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable, Iterable
from typing import Any

from gpuscope.cleanup.snapshot import ProcInfo, ProcTable
from gpuscope.procs.namespace import map_gpu_pids

# Below this share of one core, a process counts as sleeping between two observations.
SLEEP_CPU_SHARE = 0.02


def open_gpu_backend(backend: Any = None) -> tuple[Any | None, str | None]:
    """The backend to use, or (None, why GPU checks are skipped)."""
    if backend is None:
        try:
            from gpuscope.telemetry.gpu import open_backend
        except ImportError as exc:
            return None, f"the GPU telemetry module is not available ({exc})"
        try:
            backend = open_backend()
        except Exception as exc:  # noqa: BLE001 - any NVML failure means "no GPU checks"
            return None, f"NVML could not be opened ({exc})"
    if not getattr(backend, "available", False):
        return None, getattr(backend, "reason", None) or "no NVIDIA GPU or driver found"
    return backend, None


def _first_attr(obj: Any, names: Iterable[str]) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def device_utilisation(devices: Iterable[Any]) -> dict[int, float | None]:
    """Device index -> GPU (SM) utilisation in percent, from device samples."""
    out: dict[int, float | None] = {}
    for pos, dev in enumerate(devices):
        index = _first_attr(dev, ("index", "device_index"))
        util = _first_attr(dev, ("util_gpu", "gpu_util", "utilization", "util", "sm_util",
                                 "utilization_gpu", "gpu_utilization"))
        out[int(pos if index is None else index)] = None if util is None else float(util)
    return out


@dataclass
class GpuHolding:
    """One process's GPU use in one observation, summed over devices."""

    pid: int
    memory: int
    devices: list[int]
    sm_util: float | None          # max per-process SM utilisation over its devices
    device_util: float | None      # max device utilisation over its devices
    per_process: bool              # whether sm_util is per-process (else device-wide)


def gpu_holdings(backend: Any) -> dict[int, GpuHolding]:
    """pid -> its GPU memory and utilisation now, read from the backend."""
    return holdings_from(backend.processes(), backend.devices())


def holdings_from(processes: Iterable[Any], devices: Iterable[Any]) -> dict[int, GpuHolding]:
    """pid -> its GPU memory and utilisation, from GpuProcessSample and DeviceSample lists
    (the app can pass the sampler's own samples).

    NVML answers per-process utilisation only for processes that ran on the GPU in its sample
    window: where it gave numbers for some processes of a device, a process without one had
    0 %; where it gave none on a device, the device's utilisation stands in.
    """
    out: dict[int, GpuHolding] = {}
    dev_util = device_utilisation(devices)
    samples = list(processes)
    reported = {int(s.device_index) for s in samples if s.sm_util is not None}
    for sample in samples:
        pid, dev = int(sample.pid), int(sample.device_index)
        hold = out.setdefault(pid, GpuHolding(pid, 0, [], None, None, True))
        hold.memory += int(sample.used_memory_bytes or 0)
        if dev not in hold.devices:
            hold.devices.append(dev)
        sm = sample.sm_util if sample.sm_util is not None else (0.0 if dev in reported else None)
        if sm is None:
            hold.per_process = False
        else:
            hold.sm_util = max(hold.sm_util or 0.0, float(sm))
        util = dev_util.get(dev)
        if util is not None:
            hold.device_util = max(hold.device_util or 0.0, util)
    return out


def local_holdings(holdings: dict[int, GpuHolding], table: ProcTable, container: bool,
                   holds_gpu: Callable[[ProcInfo], bool] | None = None) -> dict[int, GpuHolding]:
    """``holdings`` keyed by this PID namespace's pids: in a container NVML's host pids are mapped
    (:func:`gpuscope.procs.namespace.map_gpu_pids`); one that cannot be placed keeps its host pid
    (listed as GPU memory of a pid not visible here, never put on a local process by its number)."""
    if not container or not holdings:
        return holdings
    found = map_gpu_pids(((pid, h.memory) for pid, h in holdings.items()), host=False, procs=table.procs,
                         holds_gpu=holds_gpu)
    out: dict[int, GpuHolding] = {}
    for g in found:
        hold = holdings[g.nvml_pid]
        if g.local_pid is not None:
            hold.pid = g.local_pid
        out[hold.pid] = hold
    return out


@dataclass
class _Track:
    """What was seen of one GPU holder across scans (idle time, CPU, memory)."""

    first_seen: float
    last_seen: float
    last_active: float | None
    cpu_time: float
    cpu_first: float
    memory: int = 0
    devices: list[int] = field(default_factory=list)
    per_process: bool = True
    observations: int = 0


@dataclass
class IdleVerdict:
    """A GPU holder judged idle: how long, how much memory, on which devices."""

    pid: int
    create_time: float
    idle_s: float
    memory: int
    devices: list[int]
    per_process: bool
    cpu_share: float


class IdleTracker:
    """Tracks GPU-memory holders over repeated observations.

    A holder is idle when, for at least ``window_s``, every observation showed 0 % SM
    utilisation (its own where NVML gives per-process numbers, else its devices') and it used
    less than 2 % of a core between observations (it sleeps). The app feeds it continuously;
    the CLI feeds it for a short window.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = float(window_s)
        self._tracks: dict[tuple[int, float], _Track] = {}

    def observe(self, now: float, table: ProcTable, holdings: dict[int, GpuHolding]) -> None:
        seen: set[tuple[int, float]] = set()
        for pid, hold in holdings.items():
            proc = table.get(pid)
            if proc is None or hold.memory <= 0:
                continue
            key = (pid, proc.create_time)
            seen.add(key)
            track = self._tracks.get(key)
            if track is None:
                track = _Track(now, now, None, proc.cpu_time, proc.cpu_time)
                self._tracks[key] = track
            elif self._active_between(track, now, proc):
                track.last_active = now
            if self._gpu_busy(hold):
                track.last_active = now
            track.last_seen, track.cpu_time = now, proc.cpu_time
            track.memory, track.devices, track.per_process = hold.memory, hold.devices, hold.per_process
            track.observations += 1
        for key in [k for k in self._tracks if k not in seen]:
            del self._tracks[key]

    @staticmethod
    def _gpu_busy(hold: GpuHolding) -> bool:
        util = hold.sm_util if hold.per_process else hold.device_util
        return util is None or util > 0   # unknown utilisation never counts as idle

    @staticmethod
    def _active_between(track: _Track, now: float, proc: ProcInfo) -> bool:
        dt = now - track.last_seen
        return dt > 0 and (proc.cpu_time - track.cpu_time) > SLEEP_CPU_SHARE * dt + 0.01

    def idle(self, now: float) -> list[IdleVerdict]:
        """Holders idle for the whole window (none when the window is 0: the check is off)."""
        if self.window_s <= 0:
            return []
        out = []
        for (pid, ct), t in self._tracks.items():
            since = t.last_active if t.last_active is not None else t.first_seen
            idle_s = now - since
            if t.observations >= 2 and idle_s >= self.window_s:
                span = max(t.last_seen - t.first_seen, 1e-9)
                out.append(IdleVerdict(pid, ct, idle_s, t.memory, list(t.devices), t.per_process,
                                       (t.cpu_time - t.cpu_first) / span))
        return out
