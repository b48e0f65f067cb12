"""Host totals: per-core CPU (psutil), memory and swap (one read of /proc/meminfo).

CPU percentages are computed from our own previous reading (not ``psutil.cpu_percent``, whose
state is global to the process and would be shared by two samplers). Memory and swap come from
``/proc/meminfo`` in one read (psutil's ``swap_memory`` also parses /proc/vmstat each call,
which was half the host cost); psutil is the fallback where that file is not as expected.
"""

from __future__ import annotations

import psutil

from gpuscope.processes import read_bytes
from gpuscope.telemetry.batch import HostSample

_MEMINFO_KEYS = (b"MemTotal:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:")


def memory() -> tuple[int, int, int, int]:
    """(mem_used, mem_total, swap_used, swap_total) in bytes; used = total - available."""
    found: dict[bytes, int] = {}
    for line in (read_bytes("/proc/meminfo", 65536) or b"").split(b"\n"):
        key = line[:line.find(b":") + 1]
        if key in _MEMINFO_KEYS:
            found[key] = int(line.split()[1]) * 1024
    if len(found) == len(_MEMINFO_KEYS):
        total, avail, stotal, sfree = (found[k] for k in _MEMINFO_KEYS)
        return total - avail, total, stotal - sfree, stotal
    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    return int(vm.total - vm.available), int(vm.total), int(sw.used), int(sw.total)


def _busy_idle(t: object) -> tuple[float, float]:
    idle = getattr(t, "idle", 0.0) + getattr(t, "iowait", 0.0)
    total = sum(t)  # type: ignore[arg-type]
    # guest time is already counted in user/nice on Linux
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    return total - idle, idle


class HostSampler:
    """Call :meth:`sample` each tick; the first call reports CPU as None (no interval yet)."""

    def __init__(self) -> None:
        self._prev: list[tuple[float, float]] | None = None

    def sample(self) -> HostSample:
        now = [_busy_idle(t) for t in psutil.cpu_times(percpu=True)]
        cores: tuple[float, ...] = ()
        if self._prev is not None and len(self._prev) == len(now):
            cores = tuple(_percent(p, n) for p, n in zip(self._prev, now))
        self._prev = now
        mem_used, mem_total, swap_used, swap_total = memory()
        return HostSample(cpu=round(sum(cores) / len(cores), 1) if cores else None, cores=cores,
                          mem_used=mem_used, mem_total=mem_total, swap_used=swap_used, swap_total=swap_total)


def _percent(prev: tuple[float, float], now: tuple[float, float]) -> float:
    busy, idle = now[0] - prev[0], now[1] - prev[1]
    total = busy + idle
    return round(100.0 * busy / total, 1) if total > 0 else 0.0
