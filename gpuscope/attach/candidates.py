"""The Python process trees one could attach to: the rows of the app's picker.

A tree's root is a Python process whose parent is not Python (a shell, init) or that leads its own
process group (a shell's job, a scheduler's child): a pool's workers or torchrun's ranks share
their parent's group, so they are counted in their job, not listed on their own. Each row
sums the tree: processes, CPU (since it started), RSS and, where NVML reads, GPU memory.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscope.attach import roles

if TYPE_CHECKING:
    from gpuscope.procs.read import ProcInfo
    from gpuscope.telemetry.gpu import GpuBackend

# the root's role -> what the picker calls the job
KINDS = {"torchrun agent": "torchrun agent", "jupyter kernel": "jupyter kernel", "ray worker": "ray"}


@dataclass(frozen=True)
class TreeRow:
    """One job: its root, what it looks like, and what its tree uses."""

    root_pid: int
    cmdline: tuple[str, ...]
    kind: str                   # torchrun agent | ray driver | jupyter kernel | multiprocessing parent | python
    age_s: float
    nprocs: int
    cpu_percent: float          # average since the root started, of one core
    rss_bytes: int
    gpu_mem_bytes: int | None   # None: no GPU reading
    user: str


def _kind(root: ProcInfo, tree: list[ProcInfo]) -> str:
    found = roles.by_command(root.cmdline)
    if found is not None and found.role in KINDS:
        return KINDS[found.role]
    kids = [roles.by_command(p.cmdline) for p in tree[1:]]
    if any(k is not None and k.role.startswith("ray ") for k in kids) or any("raylet" in p.comm for p in tree):
        return "ray driver"
    if any(k is not None and k.role in ("resource tracker", "forkserver", "spawn child") for k in kids) or any(
            p.cmdline == root.cmdline for p in tree[1:]):
        return "multiprocessing parent"
    return "python"


def list_trees(all_users: bool = False, gpu: GpuBackend | None = None) -> list[TreeRow]:
    """This user's (``all_users``: everyone's) Python process trees, largest CPU first; gpuscope
    itself is left out."""
    from gpuscope.attach.access import user_name
    from gpuscope.procs.read import snapshot

    procs = snapshot()
    me, uid = os.getpid(), os.geteuid()
    kids: dict[int, list[ProcInfo]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p)
    gpu_mem = _gpu_memory(gpu)
    now = time.time()
    rows = []
    for p in procs.values():
        parent = procs.get(p.ppid)
        if p.pid == me or p.is_zombie or not roles.is_python(p):
            continue
        if parent is not None and roles.is_python(parent) and p.pgid != p.pid:
            continue                 # a worker of a Python parent (a job leads its own process group)
        if not all_users and p.uid != uid:
            continue
        tree, todo = [p], list(kids.get(p.pid, ()))
        while todo:
            q = todo.pop()
            tree.append(q)
            todo += kids.get(q.pid, ())
        if any(q.pid == me for q in tree):
            continue
        age = max(now - p.create_time, 1e-3)
        mem = [gpu_mem[q.pid] for q in tree if q.pid in gpu_mem] if gpu_mem is not None else None
        rows.append(TreeRow(p.pid, p.cmdline, _kind(p, tree), age, len(tree),
                            100.0 * sum(q.cpu_time for q in tree) / age, sum(q.rss for q in tree),
                            sum(mem) if mem is not None else None, user_name(p.uid)))
    return sorted(rows, key=lambda r: -r.cpu_percent)


def _gpu_memory(gpu: GpuBackend | None) -> dict[int, int] | None:
    """pid -> GPU memory (None: no GPU reading)."""
    from gpuscope.telemetry.gpu import open_backend

    backend = gpu if gpu is not None else open_backend()
    try:
        if not backend.available:
            return None
        out: dict[int, int] = {}
        for g in backend.processes():
            out[g.pid] = out.get(g.pid, 0) + (g.used_memory_bytes or 0)
        return out
    finally:
        if gpu is None:
            backend.close()
