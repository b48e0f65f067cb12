"""nsys's processes: find a profile's process tree and its agent, stop them, spot stale agents.

``nsys profile`` starts a daemonised agent (``nsys --start-agent --session-name=…``) that is
re-parented to PID 1 at once and lives in its own session, and the profiled program runs in yet
another session under ``nsys-launcher``. So a kill of nsys's process group reaches neither: this
module finds all of them through :mod:`gpuscope.procs` (which also parses the agents' session
names) and stops them through identity-checked handles (:mod:`gpuscope.procs.signals`).
Zombies count as gone: PID 1 does not reap on every machine (containers without an init), and a
zombie holds no resources but its pid.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuscope.procs import signals
from gpuscope.procs.membership import nsys_agent
from gpuscope.procs.read import CLK_TCK, ProcInfo, alive, key_of, open_files, read, snapshot
from gpuscope.procs.shm import refs_of, remove_unused

__all__ = ["Agent", "agent_of", "agents", "alive", "find_stale_agents", "profile_processes",
           "remove_unused_shm", "shm_files", "stale_reason", "still_nsys", "temp_reports",
           "terminate", "tree"]


@dataclass(frozen=True)
class Agent:
    """One ``nsys --start-agent`` process."""

    pid: int
    session_name: str
    profile_pid: int | None  # pid of the ``nsys profile`` that started it (from the session name)
    exe: str


def agent_of(cmdline: list[str] | tuple[str, ...]) -> tuple[str, int | None] | None:
    """(session name, profile pid) when ``cmdline`` is an nsys agent's, else None (the parsing
    is :func:`gpuscope.procs.membership.nsys_agent`)."""
    name = nsys_agent(cmdline) if cmdline else None
    return (name.session, name.profile_pid) if name else None


def agents(procs: Mapping[int, ProcInfo] | None = None) -> list[Agent]:
    """Every live nsys agent on this machine that we may see (in ``procs``, default: now)."""
    found = []
    for p in (snapshot() if procs is None else procs).values():
        if p.is_zombie or p.is_kernel_thread:
            continue
        name = nsys_agent(p.cmdline) if p.cmdline else None
        if name is not None:
            found.append(Agent(p.pid, name.session, name.profile_pid, p.cmdline[0]))
    return found


def _is_nsys(p: ProcInfo) -> bool:
    return bool(p.cmdline) and os.path.basename(p.cmdline[0]) == "nsys"


def still_nsys(pid: int) -> bool:
    """False when ``pid`` now belongs to another program (the nsys that had it was reaped and the
    number reused); True for a live nsys, a zombie, or a pid no process has."""
    p = read(pid)
    if p is None or p.is_zombie:
        return True
    return _is_nsys(p)


def stale_reason(agent: ProcInfo, procs: Mapping[int, ProcInfo] | None = None) -> str | None:
    """Why an nsys agent is stale, or None when it is not an agent or its session may be alive.

    ``nsys profile`` names its session ``profile-<app>-<pid of nsys profile>`` (2022.4) or
    ``profile-<pid>`` (2023.4, 2024.2): the agent is stale when that process is gone, a zombie,
    or the pid now belongs to another program or to a process started after the agent. Sessions
    of ``nsys launch``/``start`` have other names and legitimately outlive their command, so
    they are never called stale. ``procs``: a snapshot to look the profile process up in.
    """
    name = nsys_agent(agent.cmdline) if agent.cmdline else None
    if name is None or name.profile_pid is None:
        return None
    front = procs.get(name.profile_pid) if procs is not None else read(name.profile_pid)
    if front is not None and not front.is_zombie and front.start_ticks <= agent.start_ticks + CLK_TCK \
            and _is_nsys(front):
        return None
    return (f"Nsight Systems agent of session {name.session}, whose `nsys profile` "
            f"(pid {name.profile_pid}) is gone")


def find_stale_agents(procs: Mapping[int, ProcInfo] | None = None) -> list[int]:
    """Pids of nsys agents whose ``nsys profile`` process is gone (see :func:`stale_reason`)."""
    procs = snapshot() if procs is None else procs
    return [a.pid for a in agents(procs) if stale_reason(procs[a.pid], procs)]


def profile_processes(output: str) -> list[int]:
    """Live ``nsys profile`` processes whose command line writes to ``output`` (their ``-o`` value)."""
    pids = []
    for p in snapshot().values():
        cmd = p.cmdline if not p.is_zombie and not p.is_kernel_thread else ()
        if len(cmd) > 2 and os.path.basename(cmd[0]) == "nsys" and "profile" in cmd and output in cmd:
            pids.append(p.pid)
    return sorted(pids)


def tree(roots: list[int] | set[int]) -> set[int]:
    """``roots`` with their descendants and every process in their sessions and groups.

    nsys-launcher starts the program with ``setsid``, so the program is found by its session id;
    and once ``nsys profile`` (a session leader when started with ``start_new_session``) is dead,
    what it left is found because its pid is still their session / group id.
    """
    roots = set(roots)
    procs = snapshot()
    everything = {pid: (p.sid, p.pgid) for pid, p in procs.items()}
    pids = {p for p in roots if p in everything}
    pids |= {p for p, (sid, pgid) in everything.items() if sid in roots or pgid in roots}
    pids |= _descendants(pids, procs)
    own_sid = os.getsid(0)
    sids = {everything[p][0] for p in pids if p in everything} - {own_sid}
    pids |= {p for p, (sid, _) in everything.items() if sid in sids}
    pids |= _descendants(pids, procs)
    pids.discard(os.getpid())
    return pids


def _descendants(pids: set[int], procs: Mapping[int, ProcInfo]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out: set[int] = set()
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def terminate(pids: set[int], grace_s: float, watch: Callable[[], None] | None = None) -> set[int]:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns the pids still alive afterwards.

    Each pid's identity (pid and start time) is taken now and held by a pidfd, so no signal
    reaches a process that got one of these pids later. ``watch`` is called while waiting.
    Nothing is reaped here: a caller that holds a ``Popen`` for one of them must keep its exit
    status.
    """
    keys = {k for k in map(key_of, pids) if k is not None}
    return {k.pid for k in signals.terminate(keys, grace_s, watch=watch)}


def temp_reports(pids: set[int]) -> set[str]:
    """The ``/tmp/nsys-report-*.qdstrm`` files that ``pids`` hold open (left behind by a kill)."""
    paths: set[str] = set()
    for pid in pids:
        paths.update(f for f in open_files(pid) if os.path.basename(f).startswith("nsys-report-"))
    return paths


def shm_files(pids: set[int]) -> set[str]:
    """``/dev/shm`` files that ``pids`` map or hold open (nsys's agent instance file, its semaphores).

    A SIGKILLed nsys leaves them behind: ``quadd-agent-instance-<pid>``, ``sem.nsys_sem_<pid>`` and
    ``NSys-2022.4.2.1`` (2022.4), ``sem.NSys-process_waiter-<pid>-…`` (2023.4, 2024.2).
    """
    found: set[str] = set()
    for pid in pids:
        found |= refs_of(pid)
    return found


def remove_unused_shm(paths: set[str]) -> list[str]:
    """Delete those of ``paths`` that are ours and that no live process maps or holds open
    (the rules of :func:`gpuscope.procs.shm.unlink_refusal`); returns what was deleted."""
    return remove_unused(paths)
