"""Whether a pid is something to attach to: one clear line (a UserError, exit 2) when it is not."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpuscope.attach import roles
from gpuscope.errors import UserError
from gpuscope.procs.read import read as read_proc

if TYPE_CHECKING:
    from gpuscope.procs.read import ProcInfo


def check_target(pid: int) -> ProcInfo:
    """The root's process, or a UserError that says why there is nothing to attach."""
    from gpuscope.procs.read import snapshot

    if pid <= 0:
        raise UserError(f"no process {pid}")
    info = read_proc(pid)
    if info is None:
        raise UserError(f"no process {pid}")
    if info.is_zombie:
        raise UserError(f"process {pid} has already ended (a zombie waiting for its parent)")
    if info.is_kernel_thread:
        raise UserError(f"process {pid} is a kernel thread: nothing to attach")
    if pid == os.getpid():
        raise UserError("gpuscope cannot attach to itself")
    if roles.is_python(info):
        return info
    procs = snapshot()
    kids: dict[int, list[ProcInfo]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p)
    todo = list(kids.get(pid, ()))
    while todo:
        p = todo.pop()
        if roles.is_python(p):
            return info
        todo += kids.get(p.pid, ())
    raise UserError(f"process {pid} ({info.comm}) is not a Python program and runs none: nothing to attach")
