"""Roles of a process gpuscope did not start, read from the outside.

The command line says most (the resource tracker, the forkserver, a spawned child, torchrun's
agent, a Jupyter kernel, loky, Ray's scripts); the environment gives torchrun's ranks
(``RANK``/``LOCAL_RANK``/``WORLD_SIZE``); a child whose command line is its parent's was forked.
What a spawned or forked child runs (a pool, an executor, a DataLoader) is only in its stack:
:func:`role_from_stacks` refines the role once a stack has been read. The names are those the
injected hook gives (``gpuscope/inject/procname.py``), so an attached run reads like a recorded one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscope.inject.procname import TARGET_ROLES, ray_script_role

if TYPE_CHECKING:
    from gpuscope.findings.stacks import ProcessStacks
    from gpuscope.procs.read import ProcInfo

_PYTHON = re.compile(r"^(python|pypy)[\d.]*[dmu]?$")
# roles a stack can make more precise (a generic child becomes the worker it runs)
REFINABLE = ("spawn child", "fork child", "forkserver child", "process child")


@dataclass(frozen=True)
class Role:
    """What a process is: ``role`` (``main``, ``pool worker``, ``rank 1``, ...), its torchrun rank,
    and how it was started (``spawn``, ``fork``, ``forkserver``, ``exec``; None when unknown)."""

    role: str
    rank: int | None = None
    start_method: str | None = None

    @property
    def refinable(self) -> bool:
        return self.role in REFINABLE or self.role.startswith("worker of rank ")


def is_python(info: ProcInfo) -> bool:
    """A Python interpreter, by its program's name (or the names Python programs give themselves)."""
    argv0 = os.path.basename(info.cmdline[0]) if info.cmdline else ""
    if _PYTHON.match(argv0) or _PYTHON.match(info.comm):
        return True
    # torch names its main thread, Ray its workers (setproctitle), ipykernel runs python
    return info.comm.startswith(("pt_", "ray::")) or argv0.startswith("ray::") or argv0 in ("torchrun", "jupyter")


def _code(argv: tuple[str, ...]) -> str:
    return argv[argv.index("-c") + 1] if "-c" in argv and argv.index("-c") + 1 < len(argv) else ""


def _module(argv: tuple[str, ...]) -> str:
    return argv[argv.index("-m") + 1] if "-m" in argv and argv.index("-m") + 1 < len(argv) else ""


def _rank(env: dict[str, str]) -> int | None:
    if "RANK" in env and ("LOCAL_RANK" in env or "WORLD_SIZE" in env) and env["RANK"].isdigit():
        return int(env["RANK"])
    return None


def by_command(argv: tuple[str, ...]) -> Role | None:
    """The role a command line alone tells, or None."""
    code, module = _code(argv), _module(argv)
    if "multiprocessing.resource_tracker" in code or "multiprocessing.semaphore_tracker" in code:
        return Role("resource tracker", start_method="spawn")
    if "multiprocessing.forkserver" in code:
        return Role("forkserver", start_method="spawn")
    if "multiprocessing.spawn" in code or "--multiprocessing-fork" in argv:
        return Role("spawn child", start_method="spawn")
    if "loky" in module or "loky" in code:
        return Role("loky worker", start_method="spawn")
    if module in ("torch.distributed.run", "torch.distributed.launch") or (
            argv and os.path.basename(argv[0]) == "torchrun") or (
            len(argv) > 1 and os.path.basename(argv[1]) == "torchrun"):
        return Role("torchrun agent")
    if module == "ipykernel_launcher" or module == "ipykernel" or "ipykernel_launcher" in " ".join(argv[:3]):
        return Role("jupyter kernel")
    if argv and argv[0].startswith("ray::"):
        return Role("ray worker")
    ray = ray_script_role(list(argv))
    return Role(ray) if ray else None


def classify(info: ProcInfo, parent: tuple[ProcInfo, Role] | None, is_root: bool) -> Role:
    """The role of ``info``; ``parent``: its parent's process and role when it is in the tree."""
    argv = info.cmdline
    rank = _rank(info.environ)
    parent_role = parent[1] if parent is not None else None
    forked = parent is not None and bool(argv) and argv == parent[0].cmdline
    if forked and parent_role is not None:
        if parent_role.role == "forkserver":
            return Role("forkserver child", start_method="forkserver")
        if parent_role.rank is not None:
            return Role(f"worker of rank {parent_role.rank}", parent_role.rank, "fork")
        return Role("fork child", start_method="fork")
    found = by_command(argv)
    if found is not None:
        if found.role == "spawn child" and parent_role is not None and parent_role.rank is not None:
            return Role(f"worker of rank {parent_role.rank}", parent_role.rank, "spawn")
        return found
    if rank is not None and (parent_role is None or parent_role.rank != rank):
        return Role(f"rank {rank}", rank, "exec")
    if is_root:
        return Role("main") if is_python(info) else Role(info.comm or "launcher")
    if parent is not None and parent[1].role == parent[0].comm and is_python(info) and not is_python(parent[0]):
        return Role("main", start_method="exec")      # the program a shell or launcher script started
    return Role("subprocess" if is_python(info) else (info.comm or "subprocess"), start_method="exec")


def role_from_stacks(stacks: ProcessStacks) -> str | None:
    """The worker role the frames of a process show (a pool's ``worker``, a DataLoader's
    ``_worker_loop``...), or None."""
    for thread in stacks.threads:
        for frame in thread.frames:
            module = _module_of(frame.file)
            role = TARGET_ROLES.get((module, frame.function.rsplit(".", 1)[-1])) if module else None
            if role is not None:
                return role
    return None


def _module_of(path: str) -> str:
    """``multiprocessing.pool`` for ``.../lib/python3.11/multiprocessing/pool.py``: the dotted
    path from the first folder that names a known package."""
    parts = path.replace("\\", "/").removesuffix(".py").split("/")
    for start in ("multiprocessing", "concurrent", "joblib", "loky", "torch"):
        if start in parts:
            return ".".join(parts[parts.index(start):])
    return ""


def refined(role: Role, stacks: ProcessStacks) -> Role:
    """``role`` made precise by the process's stack (kept when the stack says nothing more)."""
    if not role.refinable:
        return role
    found = role_from_stacks(stacks)
    return Role(found, role.rank, role.start_method) if found else role
