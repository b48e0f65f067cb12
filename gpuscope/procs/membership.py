"""The one rule that says *why* a process belongs to a run.

A process belongs to a run when it is

* ``root``: the run's first process (pid and start time);
* ``parent``: a child of a member (so: every descendant the members' parents can be followed to);
* ``session`` / ``pgrp``: in the session (or process group) the root leads, started after it;
  this catches a child whose parent died before anyone saw it (re-parented to PID 1);
* ``env``: its environment carries ``GPUSCOPE_RUN_ID=<run id>`` (same user, started after the
  root): a double fork *with* ``setsid`` whose intermediate parent is gone;
* ``nsys-agent`` (only when the scope asks for it): an ``nsys --start-agent`` whose session
  name names a member ``nsys profile`` (the agent is daemonised into its own session).

Cleanup adds ``recorded``: the process is in a finished run's stored process table (pid and
create time), see :mod:`gpuscope.cleanup.runlink`.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, NamedTuple

from gpuscope.procs.read import ProcInfo, all_pids, alive, environ_has, environ_raw, owner, read, snapshot

if TYPE_CHECKING:
    from gpuscope.procs.existing import Existing

RUN_ID_VAR = "GPUSCOPE_RUN_ID"
_PROFILE_SESSION = re.compile(r"^profile-(?:.*-)?(\d+)$")


class NsysAgentName(NamedTuple):
    """What an ``nsys --start-agent`` command line says about its session."""

    session: str
    profile_pid: int | None   # the ``nsys profile`` that started it (``profile-[<app>-]<pid>`` names)


def nsys_agent(cmd: Iterable[str]) -> NsysAgentName | None:
    """The session of an Nsight Systems agent's command line, or None when it is not one.

    Seen forms: ``--session-name=profile-python-8421`` (2022.4), ``--session-name=profile-12898``
    (2023.4), ``--session-name profile-12969`` (2024.2). Sessions of ``nsys launch``/``start``
    have other names and no profile pid.
    """
    args = list(cmd)
    if not args or "--start-agent" not in args or not os.path.basename(args[0]).startswith("nsys"):
        return None
    name = ""
    for i, arg in enumerate(args):
        if arg.startswith("--session-name="):
            name = arg.split("=", 1)[1]
        elif arg == "--session-name" and i + 1 < len(args):
            name = args[i + 1]
    match = _PROFILE_SESSION.match(name)
    return NsysAgentName(name, int(match.group(1)) if match else None)


class Reason(str, enum.Enum):
    """Why a process belongs to a run (the value is stored as ``via``)."""

    ROOT = "root"
    PARENT = "parent"
    SESSION = "session"
    PGRP = "pgrp"
    ENV = "env"
    NSYS_AGENT = "nsys-agent"
    RECORDED = "recorded"

    def __str__(self) -> str:
        return self.value


class RunScope(NamedTuple):
    """What identifies one run's processes: its root, the session/group the root leads, its id."""

    root_pid: int
    root_sid: int
    root_pgid: int
    root_start: int | None          # None: the root is gone (only its session/group id is known)
    run_id: str | None = None
    nsys_agents: bool = False       # count the run's nsys agents as members
    uid: int = os.getuid()          # gpuscope's own: it never changes its uid

    @classmethod
    def of(cls, root_pid: int, run_id: str | None = None, *, nsys_agents: bool = False) -> RunScope:
        """The scope of a run whose root is ``root_pid`` (read now; if it is gone, the session
        and group it led keep its pid as their id, which the kernel does not reuse meanwhile)."""
        root = read(root_pid)
        if root is None:
            return cls(root_pid, root_pid, root_pid, None, run_id, nsys_agents)
        return cls(root_pid, root.sid, root.pgid, root.start_ticks, run_id, nsys_agents)

    @property
    def marker(self) -> bytes | None:
        return f"{RUN_ID_VAR}={self.run_id}".encode() if self.run_id else None

    def cheap_reason(self, p: ProcInfo, members: Container[int]) -> Reason | None:
        """The rules that need only the stat line: root, parent, session, process group."""
        if p.pid == self.root_pid:     # the same process: same start, or (root unknown) still leading
            same = p.start_ticks == self.root_start if self.root_start is not None else p.sid == self.root_sid
            return Reason.ROOT if same else None
        if p.ppid in members:
            return Reason.PARENT
        if self.root_start is not None and p.start_ticks < self.root_start:
            return None
        if self.root_sid == self.root_pid and p.sid == self.root_sid:
            return Reason.SESSION
        if self.root_pgid == self.root_pid and p.pgid == self.root_pgid:
            return Reason.PGRP
        return None

    def costly_reason(self, p: ProcInfo, members: Container[int]) -> Reason | None:
        """The rules that read more than the stat line: the run id in the environment, nsys agents."""
        if self.root_start is not None and p.start_ticks < self.root_start:
            return None
        marker = self.marker
        if marker and owner(p.pid) == self.uid and environ_has(p.pid, marker):
            return Reason.ENV
        if self.nsys_agents and p.comm.startswith("nsys"):
            agent = nsys_agent(p.cmdline)
            if agent is not None and agent.profile_pid in members:
                return Reason.NSYS_AGENT
        return None

    def reason(self, p: ProcInfo, members: Container[int] = ()) -> Reason | None:
        """Why ``p`` belongs to the run (``members``: pids already known to belong), or None."""
        return self.cheap_reason(p, members) or self.costly_reason(p, members)

    def adopt(self, pending: dict[int, ProcInfo], members: dict[int, Reason]) -> list[int]:
        """Move from ``pending`` into ``members`` every process the rules claim (a parent found
        by one rule lets its children in by the parent rule); returns the pids added, in order."""
        added: list[int] = []
        self._adopt_cheap(pending, members, added)
        if pending and (self.marker or self.nsys_agents):
            for pid, p in list(pending.items()):
                why = self.costly_reason(p, members)
                if why:
                    members[pid] = why
                    added.append(pid)
                    del pending[pid]
            self._adopt_cheap(pending, members, added)
        return added

    def _adopt_cheap(self, pending: dict[int, ProcInfo], members: dict[int, Reason],
                     added: list[int]) -> None:
        # oldest first: a parent is judged before its children, whatever order /proc listed them in
        order = sorted(pending.items(), key=lambda item: item[1].start_ticks)
        changed = True
        while changed and pending:
            changed = False
            for pid, p in order:
                if pid not in pending:
                    continue
                why = self.cheap_reason(p, members)
                if why:
                    members[pid] = why
                    added.append(pid)
                    del pending[pid]
                    changed = True


def run_members(scope: RunScope, procs: dict[int, ProcInfo] | None = None,
                exclude: Container[int] = (), skip: Container[str] = ()) -> dict[int, tuple[ProcInfo, Reason]]:
    """The run's live (non-zombie) processes now, each with why it belongs (``skip``: pids of
    processes known to be no member, not read: see :func:`gpuscope.procs.read.snapshot`)."""
    procs = snapshot(skip) if procs is None else procs
    me = os.getpid()
    pending = {pid: p for pid, p in procs.items() if pid != me and pid not in exclude and not p.is_zombie}
    members: dict[int, Reason] = {}
    scope.adopt(pending, members)
    return {pid: (procs[pid], why) for pid, why in members.items()}


def run_processes(session_id: int, run_id: str, exclude: Container[int] | None = None,
                  existing: Existing | None = None) -> dict[int, ProcInfo]:
    """Live (non-zombie) processes of the run whose root leads session ``session_id``: the
    session's members, their descendants, and processes tagged with the run id. ``existing``: the
    processes listed before the program started, not read again while that is safe."""
    scope = RunScope.of(session_id, run_id)
    skip = existing.skippable() if existing is not None else ()
    return {pid: info for pid, (info, _) in run_members(scope, exclude=exclude or (), skip=skip).items()}


def has_run_tag(pid: int, run_id: str) -> bool:
    """Whether the process's environment carries GPUSCOPE_RUN_ID=<run_id>."""
    return environ_has(pid, f"{RUN_ID_VAR}={run_id}".encode())


def tagged_pids(run_id: str) -> list[int]:
    """Live processes whose environment carries the run's id."""
    return [p for p in all_pids() if alive(p) and has_run_tag(p, run_id)]


def run_id_of(pid: int) -> str | None:
    """The ``GPUSCOPE_RUN_ID`` in a process's environment; None when it has none. Raises
    ``LookupError`` when the process is gone or its environment is not readable."""
    data = environ_raw(pid)
    if data is None:
        raise LookupError(pid)
    prefix = RUN_ID_VAR.encode() + b"="
    return next((e[len(prefix):].decode(errors="replace") for e in data.split(b"\0") if e.startswith(prefix)),
                None)
