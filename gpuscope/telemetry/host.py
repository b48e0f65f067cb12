"""Host totals: per-core CPU (one read of /proc/stat), memory and swap (one of /proc/meminfo).

CPU percentages are computed from our own previous reading (not ``psutil.cpu_percent``, whose
state is global to the process and would be shared by two samplers). Both files are read through
descriptors kept open (``gpuscope.procs.files.ProcFile``) and parsed for the few fields used: psutil's
``cpu_times(percpu=True)`` builds a named tuple per core and ``swap_memory`` also parses
/proc/vmstat each call (together most of the host cost per tick). psutil is the fallback where a
file is not as expected (imported only then).
"""

from __future__ import annotations

from gpuscope.procs.files import ProcFile, host_file, read_bytes
from gpuscope.telemetry.batch import HostSample

_MEMINFO_KEYS = (b"MemTotal:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:")


def memory(meminfo: ProcFile | None = None) -> tuple[int, int, int, int]:
    """(mem_used, mem_total, swap_used, swap_total) in bytes; used = total - available."""
    data = (meminfo.read() if meminfo is not None else read_bytes(host_file("meminfo"), 65536)) or b""
    values = [_meminfo_kib(data, key) for key in _MEMINFO_KEYS]
    if None not in values:
        total, avail, stotal, sfree = (v * 1024 for v in values)  # type: ignore[operator]
        return total - avail, total, stotal - sfree, stotal
    import psutil  # the fallback only: not imported where /proc answers

    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    return int(vm.total - vm.available), int(vm.total), int(sw.used), int(sw.total)


def _meminfo_kib(data: bytes, key: bytes) -> int | None:
    """The kB figure of the line that starts with ``key`` (found, not every line split)."""
    if data.startswith(key):
        at = 0
    else:
        at = data.find(b"\n" + key) + 1
        if at == 0:
            return None
    end = data.find(b"\n", at)
    try:
        return int(data[at + len(key):end if end >= 0 else len(data)].split()[0])
    except (IndexError, ValueError):
        return None


def cpu_busy_idle(stat: bytes) -> list[tuple[float, float]] | None:
    """(busy, idle) ticks per core from the ``cpuN`` lines of /proc/stat, counted as
    :func:`_busy_idle` counts psutil's per-core times (None when the text is not as expected)."""
    end = stat.find(b"\nintr")
    out: list[tuple[float, float]] = []
    for line in stat[:end if end > 0 else len(stat)].split(b"\n")[1:]:   # [0]: all cores together
        if not line.startswith(b"cpu"):
            break
        try:
            v = [int(x) for x in line.split()[1:]]
        except ValueError:
            return None
        if len(v) < 4:
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0)                         # idle + iowait
        total = sum(v) - (v[8] if len(v) > 8 else 0) - (v[9] if len(v) > 9 else 0)   # minus guest time
        out.append((total - idle, idle))
    return out or None


def _busy_idle(t: tuple[float, ...]) -> tuple[float, float]:
    idle = getattr(t, "idle", 0.0) + getattr(t, "iowait", 0.0)
    total = sum(t)
    # guest time is already counted in user/nice on Linux
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    return total - idle, idle


class HostSampler:
    """Call :meth:`sample` each tick; the first call reports CPU as None (no interval yet)."""

    def __init__(self) -> None:
        self._prev: list[tuple[float, float]] | None = None
        self._stat = ProcFile.host("stat")
        self._meminfo = ProcFile.host("meminfo")

    def close(self) -> None:
        self._stat.close()
        self._meminfo.close()

    def sample(self) -> HostSample:
        now = cpu_busy_idle(self._stat.read() or b"")
        if now is None:
            import psutil  # the fallback only

            now = [_busy_idle(t) for t in psutil.cpu_times(percpu=True)]
        cores: tuple[float, ...] = ()
        if self._prev is not None and len(self._prev) == len(now):
            cores = tuple(_percent(p, n) for p, n in zip(self._prev, now))
        self._prev = now
        mem_used, mem_total, swap_used, swap_total = memory(self._meminfo)
        return HostSample(cpu=round(sum(cores) / len(cores), 1) if cores else None, cores=cores,
                          mem_used=mem_used, mem_total=mem_total, swap_used=swap_used, swap_total=swap_total)


def _percent(prev: tuple[float, float], now: tuple[float, float]) -> float:
    busy, idle = now[0] - prev[0], now[1] - prev[1]
    total = busy + idle
    return round(100.0 * busy / total, 1) if total > 0 else 0.0
