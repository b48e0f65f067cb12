"""nsys's processes: find a profile's process tree and its agent, stop them, spot stale agents.

``nsys profile`` starts a daemonised agent (``nsys --start-agent --session-name=…``) that is
re-parented to PID 1 at once and lives in its own session, and the profiled program runs in yet
another session under ``nsys-launcher``. So a kill of nsys's process group reaches neither: this
module finds all of them through /proc (psutil). Zombies count as gone: PID 1 does not reap on
every machine (containers without an init), and a zombie holds no resources but its pid.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from typing import Callable

import psutil

_SESSION_PID = re.compile(r"-(\d+)$")


@dataclass(frozen=True)
class Agent:
    """One ``nsys --start-agent`` process."""

    pid: int
    session_name: str
    profile_pid: int | None  # pid of the ``nsys profile`` that started it (from the session name)
    exe: str


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.Error, OSError):
        return []


def agent_of(cmdline: list[str]) -> tuple[str, int | None] | None:
    """(session name, profile pid) when ``cmdline`` is an nsys agent's, else None.

    Seen forms: ``--session-name=profile-python-8421`` (2022.4), ``--session-name=profile-12898``
    (2023.4), ``--session-name profile-12969`` (2024.2); the trailing number is the pid of the
    ``nsys profile`` process.
    """
    if "--start-agent" not in cmdline or not cmdline or not os.path.basename(cmdline[0]).startswith("nsys"):
        return None
    name = ""
    for i, arg in enumerate(cmdline):
        if arg.startswith("--session-name="):
            name = arg.split("=", 1)[1]
        elif arg == "--session-name" and i + 1 < len(cmdline):
            name = cmdline[i + 1]
    m = _SESSION_PID.search(name)
    return name, int(m.group(1)) if m else None


def agents() -> list[Agent]:
    """Every live nsys agent on this machine that we may see."""
    found = []
    for proc in psutil.process_iter():
        cmd = _cmdline(proc)
        info = agent_of(cmd) if cmd else None
        if info and alive(proc.pid):
            found.append(Agent(proc.pid, info[0], info[1], cmd[0]))
    return found


def still_nsys(pid: int) -> bool:
    """False when ``pid`` now belongs to another program (the nsys that had it was reaped and the
    number reused); True for a live nsys, a zombie, or a pid no process has."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
        cmd = proc.cmdline()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    return bool(cmd) and os.path.basename(cmd[0]) == "nsys"


def find_stale_agents() -> list[int]:
    """Pids of nsys agents whose ``nsys profile`` process is gone (or a zombie)."""
    return [a.pid for a in agents() if a.profile_pid is None or not alive(a.profile_pid)]


def profile_processes(output: str) -> list[int]:
    """Live ``nsys profile`` processes whose command line writes to ``output`` (their ``-o`` value)."""
    pids = []
    for proc in psutil.process_iter():
        cmd = _cmdline(proc)
        if len(cmd) > 2 and os.path.basename(cmd[0]) == "nsys" and "profile" in cmd and output in cmd:
            if alive(proc.pid):
                pids.append(proc.pid)
    return pids


def tree(roots: list[int] | set[int]) -> set[int]:
    """``roots`` with their descendants and every process in their sessions and groups.

    nsys-launcher starts the program with ``setsid``, so the program is found by its session id;
    and once ``nsys profile`` (a session leader when started with ``start_new_session``) is dead,
    what it left is found because its pid is still their session / group id.
    """
    roots = set(roots)
    everything = _all_ids()
    pids = {p for p in roots if p in everything}
    pids |= {p for p, (sid, pgid) in everything.items() if sid in roots or pgid in roots}
    pids |= _descendants(pids)
    own_sid = os.getsid(0)
    sids = {everything[p][0] for p in pids if p in everything} - {own_sid}
    pids |= {p for p, (sid, _) in everything.items() if sid in sids}
    pids |= _descendants(pids)
    pids.discard(os.getpid())
    return pids


def _all_ids() -> dict[int, tuple[int, int]]:
    """pid -> (session id, process group id) for every process."""
    ids = {}
    for pid in psutil.pids():
        try:
            ids[pid] = (os.getsid(pid), os.getpgid(pid))
        except OSError:
            continue
    return ids


def _descendants(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            out.update(c.pid for c in psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            continue
    return out


def terminate(pids: set[int], grace_s: float, watch: "Callable[[], None] | None" = None) -> set[int]:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns the pids still alive afterwards.

    ``watch`` is called while waiting. Nothing is reaped here: a caller that holds a ``Popen`` for
    one of them must keep its exit status.
    """
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in pids:
            if alive(pid):
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            if watch:
                watch()
            time.sleep(0.05)
        if not any(alive(p) for p in pids):
            break
    return {p for p in pids if alive(p)}


def temp_reports(pids: set[int]) -> set[str]:
    """The ``/tmp/nsys-report-*.qdstrm`` files that ``pids`` hold open (left behind by a kill)."""
    paths = set()
    for pid in pids:
        try:
            files = psutil.Process(pid).open_files()
        except psutil.Error:
            continue
        paths.update(f.path for f in files if os.path.basename(f.path).startswith("nsys-report-"))
    return paths


def shm_files(pids: set[int]) -> set[str]:
    """``/dev/shm`` files that ``pids`` map or hold open (nsys's agent instance file, its semaphores).

    A SIGKILLed nsys leaves them behind: ``quadd-agent-instance-<pid>``, ``sem.nsys_sem_<pid>`` and
    ``NSys-2022.4.2.1`` (2022.4), ``sem.NSys-process_waiter-<pid>-…`` (2023.4, 2024.2).
    """
    found: set[str] = set()
    for pid in pids:
        found |= _shm_refs(pid)
    return found


def _shm_refs(pid: int) -> set[str]:
    refs = set()
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                i = line.find("/dev/shm/")
                if i >= 0:
                    refs.add(line[i:].rstrip("\n").removesuffix(" (deleted)"))
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("/dev/shm/"):
                refs.add(link.removesuffix(" (deleted)"))
    except OSError:
        pass
    return refs


def remove_unused_shm(paths: set[str]) -> list[str]:
    """Delete those of ``paths`` that no live process maps or holds open; returns what was deleted."""
    if not paths:
        return []
    used: set[str] = set()
    for pid in psutil.pids():
        if alive(pid):
            used |= _shm_refs(pid) & paths
    removed = []
    for path in sorted(paths - used):
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue
    return removed

