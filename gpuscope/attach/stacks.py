"""The Python stacks of every process of an attached tree, read from outside.

Each process is read by py-spy (``dump --json``; non-blocking by default, so a process is not
paused) or pystack, through :func:`gpuscope.findings.stacks.read_from_outside`, several at a
time. A process that is not Python is skipped with a note; one whose read is refused gets a
:class:`~gpuscope.attach.access.Refusal` (which rule, the fix); the others are still read.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuscope.attach import access
from gpuscope.findings.stacks import ProcessStacks, outside_tool, read_from_outside

if TYPE_CHECKING:
    from gpuscope.procs.read import ProcInfo

WORKERS = 8          # readers at a time: each is a short-lived py-spy process, mostly waiting on the kernel


def reader_tool() -> tuple[str, str] | None:
    """(name, path) of py-spy or pystack: on PATH, else beside this interpreter (a virtualenv's bin)."""
    found = outside_tool()
    if found is not None:
        return found
    beside = os.path.dirname(sys.executable)
    for name in ("py-spy", "pystack"):
        path = shutil.which(name, path=beside)
        if path:
            return name, path
    return None


@dataclass
class TreeStacks:
    """The stacks of a tree: per process, the refusals grouped, and how long the reads took."""

    processes: list[ProcessStacks] = field(default_factory=list)
    refused: list[access.Refusal] = field(default_factory=list)
    taken_ns: int = 0
    seconds: float = 0.0         # wall time of the whole read
    nonblocking: bool = True     # the processes were not paused (py-spy --nonblocking)

    def to_dict(self) -> dict[str, object]:
        return {"taken_ns": self.taken_ns, "seconds": round(self.seconds, 3), "nonblocking": self.nonblocking,
                "processes": [p.to_dict() for p in self.processes],
                "refused": [r.to_dict() for r in self.refused]}


def read_one(pid: int, role: str, tool: tuple[str, str] | None, nonblocking: bool,
             root_pid: int | None) -> tuple[ProcessStacks, access.Refusal | None]:
    """One process's stacks; a refusal foreseen from the rules skips the read."""
    foreseen = access.refusal(pid, root_pid)
    if foreseen is not None:
        return ProcessStacks(pid, role, source="none", note=f"not readable: {foreseen.text}"), foreseen
    got = read_from_outside(pid, role, nonblocking=nonblocking, tool=tool)
    if not got.threads and nonblocking and "ended" not in got.note:
        # a running process read without pausing it can come back torn: read it once more, paused
        got = read_from_outside(pid, role, nonblocking=False, tool=tool)
    refused = access.explain(pid, got.note, root_pid) if not got.threads else None
    if refused is not None:
        got.note = f"not readable: {refused.text}"
    return got, refused


def read_tree(procs: dict[int, tuple[str, bool]], *, root_pid: int | None = None, nonblocking: bool = True,
              workers: int = WORKERS) -> TreeStacks:
    """Stacks of ``procs`` (pid -> (role, is Python)): Python processes read in parallel."""
    t0, taken = time.monotonic(), time.time_ns()
    tool = reader_tool()
    out: list[ProcessStacks] = []
    refused: dict[int, access.Refusal] = {}
    python = sorted(pid for pid, (_, py) in procs.items() if py)
    for pid, (role, py) in procs.items():
        if not py:
            out.append(ProcessStacks(pid, role, source="none", note="not a Python process"))
    if python:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(python))),
                                thread_name_prefix="gpuscope-stacks") as pool:
            for got, why in pool.map(lambda p: read_one(p, procs[p][0], tool, nonblocking, root_pid), python):
                out.append(got)
                if why is not None:
                    refused[got.pid] = why
    out.sort(key=lambda p: p.pid)
    return TreeStacks(out, access.grouped(refused), taken, time.monotonic() - t0, nonblocking)


def python_of(infos: dict[int, ProcInfo]) -> dict[int, bool]:
    """pid -> whether it runs Python (what is worth a stack read)."""
    from gpuscope.attach.roles import is_python

    return {pid: is_python(info) and not info.is_zombie for pid, info in infos.items()}


def stacks_of_tree(root_pid: int, nonblocking: bool = True) -> TreeStacks:
    """One read of every process of the tree rooted at ``root_pid`` (``gpuscope stacks PID`` for a
    job gpuscope did not start): roles from the outside, made precise by the stacks."""
    from gpuscope.attach import roles
    from gpuscope.attach.target import check_target
    from gpuscope.procs.read import snapshot

    check_target(root_pid)
    procs = snapshot()
    tree: dict[int, roles.Role] = {}
    order = [root_pid]
    while order:
        pid = order.pop(0)
        info = procs.get(pid)
        if info is None:
            continue
        parent = procs.get(info.ppid)
        prole = tree.get(info.ppid)
        tree[pid] = roles.classify(info, (parent, prole) if parent is not None and prole is not None else None,
                                   pid == root_pid)
        order += sorted(p.pid for p in procs.values() if p.ppid == pid and p.pid not in tree)
    python = python_of({pid: procs[pid] for pid in tree})
    got = read_tree({pid: (role.role, python[pid]) for pid, role in tree.items()}, root_pid=root_pid,
                    nonblocking=nonblocking)
    for ps in got.processes:
        ps.role = roles.refined(tree[ps.pid], ps).role if ps.threads else ps.role
    return got
