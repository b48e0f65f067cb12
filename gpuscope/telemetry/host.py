"""Host totals through psutil: per-core CPU, memory, swap.

CPU percentages are computed from our own previous reading (not ``psutil.cpu_percent``, whose
state is global to the process and would be shared by two samplers).
"""

from __future__ import annotations

import psutil

from gpuscope.telemetry.batch import HostSample


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
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        return HostSample(
            cpu=sum(cores) / len(cores) if cores else None, cores=cores,
            mem_used=int(vm.total - vm.available), mem_total=int(vm.total),
            swap_used=int(sw.used), swap_total=int(sw.total),
        )


def _percent(prev: tuple[float, float], now: tuple[float, float]) -> float:
    busy, idle = now[0] - prev[0], now[1] - prev[1]
    total = busy + idle
    return round(100.0 * busy / total, 1) if total > 0 else 0.0
