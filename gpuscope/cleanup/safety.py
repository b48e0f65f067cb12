"""The safety rules for acting on a process or a segment — one implementation for CLI and app.

Every refusal is one clear line. The rules: never PID 1, never gpuscope itself or its
ancestors, never a kernel thread, never a process whose create time differs from the listed
one (a reused pid), and other users' processes or segments only when gpuscope runs as root
and the user explicitly allowed it (``--allow-other-users``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuscope.cleanup.model import ProcIdentity
from gpuscope.cleanup.snapshot import ProcInfo, ancestors, read_process, user_name

CREATE_TIME_TOLERANCE_S = 0.01


@dataclass(frozen=True)
class Policy:
    """What the user allowed for this batch of actions."""

    allow_other_users: bool = False
    grace_s: float = 3.0


class GoneError(Exception):
    """The process no longer exists (it exited since it was listed)."""


def static_refusal(pid: int) -> str | None:
    """Refusals that depend on the pid alone (checked before anything is read)."""
    me = os.getpid()
    if pid <= 0:
        return f"refusing: {pid} is not a process id"
    if pid == 1:
        return "refusing to signal PID 1"
    if pid == me:
        return f"refusing to signal gpuscope itself (pid {me})"
    if pid in ancestors(me):
        return f"refusing: pid {pid} is gpuscope's ancestor"
    return None


def owner_refusal(uid: int | None, what: str, policy: Policy) -> str | None:
    """Refusal for something owned by another user, or None."""
    euid = os.geteuid()
    if uid == euid:
        return None
    if euid == 0 and policy.allow_other_users:
        return None
    return f"refusing: {what} belongs to user {user_name(uid)}; run as root and pass --allow-other-users"


def same_process(proc: ProcInfo | None, ident: ProcIdentity) -> bool:
    """Whether ``proc`` (read now) is the process ``ident`` was listed as."""
    return proc is not None and proc.pid == ident.pid \
        and abs(proc.create_time - ident.create_time) <= CREATE_TIME_TOLERANCE_S


def check_process(ident: ProcIdentity, policy: Policy) -> ProcInfo:
    """The process ``ident`` names, read now, if gpuscope may signal it.

    Raises :class:`RefusedError` with a one-line reason, or :class:`GoneError` when it has exited.
    """
    why = static_refusal(ident.pid)
    if why:
        raise RefusedError(why)
    proc = read_process(ident.pid)
    if proc is None:
        raise GoneError(f"pid {ident.pid} is gone (it exited since it was listed)")
    if not same_process(proc, ident):
        raise RefusedError(f"refusing: pid {ident.pid} was restarted since it was listed (create time changed)")
    if proc.is_kernel_thread:
        raise RefusedError(f"refusing: pid {ident.pid} is a kernel thread")
    why = owner_refusal(proc.uid, f"pid {ident.pid}", policy)
    if why:
        raise RefusedError(why)
    return proc


def listing_refusal(proc: ProcInfo, policy: Policy) -> str | None:
    """The refusal an action would meet, judged at listing time (for greying out a row)."""
    why = static_refusal(proc.pid)
    if why:
        return why
    if proc.is_kernel_thread:
        return f"refusing: pid {proc.pid} is a kernel thread"
    return owner_refusal(proc.uid, f"pid {proc.pid}", policy)


class RefusedError(Exception):
    """An action was refused by a safety rule; ``str(exc)`` is the one-line reason."""
