"""Ending a test's own job: its whole tree, by identity (pid and start time)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from gpuscope.procs.key import ProcKey
from gpuscope.procs.read import snapshot
from gpuscope.procs.signals import send_signal


def tree_keys(pid: int) -> list[ProcKey]:
    """The process and its descendants now."""
    procs = snapshot()
    keys, todo = [], [pid]
    while todo:
        p = procs.get(todo.pop())
        if p is not None:
            keys.append(p.key)
            todo += [q.pid for q in procs.values() if q.ppid == p.pid]
    return keys


def end_tree(proc: subprocess.Popen) -> None:
    """SIGTERM to the job's group first (a pool's resource tracker ignores it, sees its parent go
    and unlinks the pool's semaphores; torchrun ends its ranks, which run in their own sessions),
    then SIGKILL to whatever of the tree is left."""
    keys = tree_keys(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        proc.poll()
        if not any(_alive(k) for k in keys):
            break
        time.sleep(0.05)
    for key in keys:
        send_signal(key, signal.SIGKILL)
    proc.wait(timeout=30)


def _alive(key: ProcKey) -> bool:
    from gpuscope.procs.read import read

    info = read(key.pid)
    return info is not None and info.start_ticks == key.start and not info.is_zombie
