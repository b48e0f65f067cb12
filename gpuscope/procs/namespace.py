"""PID namespaces: is gpuscope in the host's, and which of its processes is each NVML pid.

NVML reports the pids of the host's PID namespace. In a container (another PID namespace) those
are not the pids ``/proc`` shows, so GPU memory would be put on nobody, or on the wrong process.
:func:`map_gpu_pids` maps each NVML pid to a process of this namespace:

* ``exact``: the host pid is visible here, through ``NSpid`` (a ``/proc`` mounted from an outer
  namespace lists a process's pid at each level, outermost first); in the host namespace every
  pid that exists here maps to itself;
* ``matched``: no host pid is visible; the NVML pids left and the processes here that hold a GPU
  (``/dev/nvidia*`` open) are as many, and are paired in the order they started (a host hands out
  pids in rising order, so the smaller host pid started first; pids wrap only after ``pid_max``);
* ``unmapped``: neither: the memory is shown on a process gpuscope cannot see, never dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Literal, NamedTuple

from gpuscope.procs.files import pid_path
from gpuscope.procs.read import ProcInfo, nspids, nvidia_files_open, snapshot

# The inode of the initial (host) PID namespace: a kernel constant (PROC_PID_INIT_INO) since 3.8.
HOST_PID_NS_INO = 0xEFFFFFFC

Confidence = Literal["exact", "matched", "unmapped"]


def pid_namespace(pid: int | str = "self") -> int | None:
    """The inode of the PID namespace ``pid`` is in, or None where it cannot be read."""
    try:
        return os.stat(pid_path(pid, "ns", "pid")).st_ino
    except OSError:
        return None


def in_host_pid_namespace() -> bool | None:
    """True in the host's PID namespace, False in another (a container), None when unknown."""
    ino = pid_namespace()
    return None if ino is None else ino == HOST_PID_NS_INO


class GpuPid(NamedTuple):
    """One NVML process as this namespace sees it."""

    nvml_pid: int
    local_pid: int | None            # None: not visible here
    confidence: Confidence
    used_memory_bytes: int | None = None

    @property
    def label(self) -> str:
        """How the process is shown when it cannot be seen here."""
        if self.local_pid is not None:
            return f"pid {self.local_pid}"
        return f"host pid {self.nvml_pid} (not visible in this PID namespace)"


def _host_pids(procs: dict[int, ProcInfo]) -> dict[int, int]:
    """Outermost pid -> the pid ``/proc`` lists, for processes whose ``NSpid`` has more than one level."""
    out = {}
    for pid in procs:
        levels = nspids(pid)
        if len(levels) > 1:
            out[levels[0]] = pid
    return out


def map_gpu_pids(nvml: Iterable[tuple[int, int | None]], *, host: bool | None = None,
                 procs: dict[int, ProcInfo] | None = None,
                 holds_gpu: Callable[[ProcInfo], bool] | None = None) -> list[GpuPid]:
    """Map NVML's ``(pid, used memory)`` pairs to this namespace's processes (see the module).

    ``host``: whether gpuscope runs in the host PID namespace (read when None); ``procs``: the
    processes here (read when None); ``holds_gpu``: which of them hold a GPU (default: a
    ``/dev/nvidia*`` descriptor open), for the ``matched`` rule.
    """
    pairs = [(int(pid), mem) for pid, mem in nvml]
    host = in_host_pid_namespace() if host is None else host
    procs = snapshot() if procs is None else procs
    if host is not False:
        return [GpuPid(pid, pid if pid in procs else None, "exact" if pid in procs else "unmapped", mem)
                for pid, mem in pairs]
    outer = _host_pids(procs)
    # a /proc mounted from an outer namespace lists the outer pids, as NVML does
    outer_proc = len(nspids("self")) > 1
    out: dict[int, GpuPid] = {}
    for pid, mem in pairs:
        if pid in outer:
            out[pid] = GpuPid(pid, outer[pid], "exact", mem)
        elif outer_proc and pid in procs:
            out[pid] = GpuPid(pid, pid, "exact", mem)
    left = sorted(pid for pid, _ in pairs if pid not in out)
    taken = {g.local_pid for g in out.values()}
    gpu = holds_gpu or (lambda p: bool(nvidia_files_open(p.pid)))
    candidates = sorted((p for p in procs.values() if p.pid not in taken and not p.is_zombie and gpu(p)),
                        key=lambda p: (p.start_ticks, p.pid))
    memory = dict(pairs)
    if left and len(left) == len(candidates):
        for pid, proc in zip(left, candidates):
            out[pid] = GpuPid(pid, proc.pid, "matched", memory[pid])
    for pid in left:
        out.setdefault(pid, GpuPid(pid, None, "unmapped", memory[pid]))
    return [out[pid] for pid, _ in pairs]
