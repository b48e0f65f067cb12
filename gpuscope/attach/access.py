"""Which processes of an attached tree gpuscope may read the stacks of, and why not.

Reading another process's Python stack (py-spy, pystack) takes ptrace rights: the same user
(or ``CAP_SYS_PTRACE``: root with its capabilities), and what ``kernel.yama.ptrace_scope``
allows. A process in another PID namespace may not be reachable at all. Each refusal says which
rule, for which processes, and the one step that lifts it; everything else is still shown.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, field

from gpuscope.procs.files import host_file, read_bytes
from gpuscope.procs.namespace import pid_namespace
from gpuscope.procs.read import owner, status_fields

CAP_SYS_PTRACE = 19


@dataclass(frozen=True)
class Refusal:
    """Why stacks of ``pids`` cannot be read (``reason``: ``other-user``, ``ptrace-scope``,
    ``no-ptrace-capability``, ``pid-namespace``, ``denied``), said as a sentence, and the fix."""

    reason: str
    text: str
    fix: str
    pids: tuple[int, ...] = field(default=())

    def line(self) -> str:
        n = len(self.pids)
        who = f"pid {self.pids[0]}" if n == 1 else f"{n} processes ({', '.join(map(str, self.pids[:6]))}" + \
            (", ..." if n > 6 else "") + ")"
        return f"{who}: {self.text}; fix: {self.fix}"

    def to_dict(self) -> dict[str, object]:
        return {"reason": self.reason, "text": self.text, "fix": self.fix, "pids": list(self.pids)}


def ptrace_scope() -> int | None:
    """``kernel.yama.ptrace_scope`` (None without the Yama module)."""
    data = read_bytes(host_file("sys/kernel/yama/ptrace_scope"), 64)
    try:
        return int(data.strip()) if data else None
    except ValueError:
        return None


def has_ptrace_capability() -> bool:
    """Whether this process holds ``CAP_SYS_PTRACE`` in its effective set."""
    try:
        return bool(int(status_fields("self").get("CapEff", "0"), 16) >> CAP_SYS_PTRACE & 1)
    except ValueError:
        return False


def _caps(pid: int | str, field_name: str) -> int:
    try:
        return int(status_fields(pid).get(field_name, "0"), 16)
    except ValueError:
        return 0


def _more_capable(pid: int) -> bool:
    """The kernel lets a process without CAP_SYS_PTRACE read another only when the other's
    capabilities are a subset of its own."""
    return bool(_caps(pid, "CapPrm") & ~_caps("self", "CapPrm"))


def user_name(uid: int | None) -> str:
    if uid is None:
        return "an unknown user"
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _login(uid: int | None) -> str:
    try:
        return pwd.getpwuid(uid).pw_name if uid is not None else "THAT_USER"
    except KeyError:
        return f"'#{uid}'"


def refusal(pid: int, root_pid: int | None = None) -> Refusal | None:
    """Why reading ``pid``'s stack will be refused, foreseen from the rules, or None."""
    me, uid, cap = os.geteuid(), owner(pid), has_ptrace_capability()
    scope = ptrace_scope()
    target = root_pid if root_pid is not None else pid
    if uid is not None and uid != me and not cap:
        why = (f"owned by {user_name(uid)} while gpuscope runs as {user_name(me)}"
               + (" without CAP_SYS_PTRACE (a container drops it)" if me == 0 else ""))
        fix = ("start the container with --cap-add SYS_PTRACE" if me == 0
               else f"run it as that user: sudo -u {_login(uid)} gpuscope attach {target}")
        return Refusal("other-user", why, fix)
    if not cap and _more_capable(pid):
        return Refusal("no-ptrace-capability", "it holds capabilities that gpuscope lacks, and gpuscope runs "
                       "without CAP_SYS_PTRACE", "start the container with --cap-add SYS_PTRACE (or run gpuscope "
                       "with sudo)")
    if scope == 3:
        return Refusal("ptrace-scope", "kernel.yama.ptrace_scope is 3: no process may read another's memory",
                       "boot with kernel.yama.ptrace_scope=1 or lower (3 cannot be lowered while the system runs)")
    if scope == 2 and not cap:
        return Refusal("ptrace-scope", "kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may "
                       "read another's stack", f"sudo gpuscope attach {target}")
    if scope == 1 and not cap:
        return Refusal("ptrace-scope", "kernel.yama.ptrace_scope is 1: only a parent may read its children's "
                       "stacks", "sudo sysctl kernel.yama.ptrace_scope=0 (or run gpuscope with sudo)")
    return None


def explain(pid: int, message: str, root_pid: int | None = None) -> Refusal | None:
    """A refused read (the tool's message) as a :class:`Refusal`, or None when it was not a
    matter of rights."""
    low = message.lower()
    if not any(w in low for w in ("permission denied", "operation not permitted", "eperm", "eacces")):
        return None
    foreseen = refusal(pid, root_pid)
    if foreseen is not None:
        return foreseen
    mine, theirs = pid_namespace("self"), pid_namespace(pid)
    if mine is not None and theirs is not None and mine != theirs:
        return Refusal("pid-namespace", "it runs in another PID namespace (a container) that denies access",
                       "attach from inside that container (docker exec ... gpuscope attach)")
    return Refusal("denied", f"the system refused to let gpuscope read it ({message.strip()[:120]})",
                   "run gpuscope as root (sudo) or with CAP_SYS_PTRACE")


def grouped(found: dict[int, Refusal]) -> list[Refusal]:
    """The same refusal once, with every pid it applies to."""
    by: dict[tuple[str, str, str], list[int]] = {}
    for pid, r in sorted(found.items()):
        by.setdefault((r.reason, r.text, r.fix), []).append(pid)
    return [Refusal(reason, text, fix, tuple(pids)) for (reason, text, fix), pids in by.items()]
