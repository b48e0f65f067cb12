"""Reading Linux processes from ``/proc``: one :class:`ProcInfo`, the one ``/proc/<pid>/stat``
parser, :func:`alive`, and the one rule that says *why* a process belongs to a run.

Stdlib only: the supervisor, telemetry, cleanup and nsys all read processes through here.
Zombies count as gone for :func:`alive` (they hold no memory and cannot be signalled away; PID 1
may never reap them in a container).

Membership (:class:`RunScope`, :class:`Reason`): a process belongs to a run when it is

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

import os

from gpuscope.choices import Choices
from gpuscope.proclist import list_pids, read_bytes
from gpuscope.record import cached, field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Container, Iterable

CLK_TCK = os.sysconf("SC_CLK_TCK")
ENDED_STATES = ("Z", "X", "x")   # a zombie (ended, not yet waited for) or dead: the process has ended
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
RUN_ID_VAR = "GPUSCOPE_RUN_ID"
_PF_KTHREAD = 0x00200000

# /proc/<pid>/stat state letters as the words psutil uses (cleanup shows them).
_STATUS = {"R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop",
           "Z": "zombie", "X": "dead", "x": "dead", "K": "wake-kill", "W": "waking", "P": "parked",
           "I": "idle"}


_BOOT: list[float] = []


def boot_time() -> float:
    """Host boot time (seconds since the epoch), to turn start ticks into a create time."""
    if not _BOOT:
        for line in (read_bytes("/proc/stat", 65536) or b"").split(b"\n"):
            if line.startswith(b"btime "):
                _BOOT.append(float(line.split()[1]))
                break
        else:
            return 0.0
    return _BOOT[0]


@record(frozen=True)
class ProcInfo:
    """One process as ``/proc/<pid>/stat`` showed it; command line, environment and owner are
    read on first use (and kept)."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str          # one letter: R S D T Z X ...
    comm: str           # the kernel's name (15 characters at most)
    cpu_ticks: int      # utime + stime, in CLK_TCK units
    threads: int
    start_ticks: int    # since boot, in CLK_TCK units: (pid, start_ticks) names a process uniquely
    rss_pages: int
    flags: int = 0      # the kernel's PF_* flags

    @property
    def name(self) -> str:
        return self.comm

    @property
    def is_zombie(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def status(self) -> str:
        """The state as a word (psutil's: sleeping, running, zombie, ...)."""
        return _STATUS.get(self.state, self.state)

    @property
    def is_kernel_thread(self) -> bool:
        """kthreadd and its threads (PF_KTHREAD; pid 2 is kthreadd only outside pid namespaces)."""
        return bool(self.flags & _PF_KTHREAD)

    @property
    def rss(self) -> int:
        return self.rss_pages * PAGE_SIZE

    @property
    def cpu_time(self) -> float:
        return self.cpu_ticks / CLK_TCK

    @property
    def create_time(self) -> float:
        """Seconds since the epoch (as psutil computes it: boot time + start ticks)."""
        return boot_time() + self.start_ticks / CLK_TCK

    @cached
    def cmdline(self) -> tuple[str, ...]:
        return cmdline(self.pid)

    @property
    def cmd(self) -> str:
        """The command line as one string (the name in brackets when it has none)."""
        return " ".join(self.cmdline) if self.cmdline else f"[{self.comm}]"

    @cached
    def environ(self) -> dict[str, str]:
        """The initial environment (empty when not permitted or gone)."""
        return environ(self.pid)

    @cached
    def uid(self) -> int | None:
        return owner(self.pid)


def parse_stat(pid: int, data: bytes) -> ProcInfo | None:
    """Parse the text of ``/proc/<pid>/stat`` (the name may hold spaces and parentheses)."""
    rpar = data.rfind(b")")
    if rpar < 0:
        return None
    f = data[rpar + 2:].split(None, 22)   # the 22 fields we need; the rest stays unsplit
    try:
        return ProcInfo(pid, int(f[1]), int(f[2]), int(f[3]), f[0].decode(),
                        data[data.find(b"(") + 1:rpar].decode("utf-8", "replace"),
                        int(f[11]) + int(f[12]), int(f[17]), int(f[19]), int(f[21]), int(f[6]))
    except (IndexError, ValueError):
        return None


def read(pid: int) -> ProcInfo | None:
    """The process ``pid`` now, or None when it does not exist."""
    data = read_bytes(f"/proc/{pid}/stat", 1024)
    return parse_stat(pid, data) if data else None


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    info = read(pid)
    return info is not None and not info.is_zombie


def all_pids() -> list[int]:
    return [int(d) for d in list_pids()]


def snapshot(skip: Container[str] = ()) -> dict[int, ProcInfo]:
    """Every process now, by pid; ``skip``: pids (as /proc names them) not to read
    (``proclist.Existing.skippable``: processes known not to be a run's)."""
    out = {}
    for name in list_pids():
        if name in skip:
            continue
        info = read(int(name))
        if info is not None:
            out[int(name)] = info
    return out


def cmdline(pid: int) -> tuple[str, ...]:
    data = read_bytes(f"/proc/{pid}/cmdline", 65536) or b""
    return tuple(a.decode("utf-8", "replace") for a in data.split(b"\0") if a)


def environ(pid: int) -> dict[str, str]:
    """The process's initial environment (empty when not permitted or gone)."""
    env: dict[str, str] = {}
    for item in (read_bytes(f"/proc/{pid}/environ", 65536) or b"").split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def environ_has(pid: int, entry: bytes) -> bool:
    """Whether ``KEY=value`` is one of the process's initial environment entries."""
    data = read_bytes(f"/proc/{pid}/environ", 65536)
    if not data:
        return False
    return data.startswith(entry + b"\0") or (b"\0" + entry + b"\0") in data or data == entry


def owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def ancestors(pid: int) -> list[int]:
    """Ancestors of ``pid`` read now, nearest first (ends with 1, or earlier if one is gone)."""
    out: list[int] = []
    seen = {pid}
    info = read(pid)
    while info is not None and info.ppid > 0 and info.ppid not in seen:
        out.append(info.ppid)
        seen.add(info.ppid)
        info = read(info.ppid)
    return out


# -- nsys agents ----------------------------------------------------------------------------------

_PROFILE_SESSION = r"^profile-(?:.*-)?(\d+)$"


@record(frozen=True)
class NsysAgentName:
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
    if "--start-agent" not in args or not os.path.basename(args[0]).startswith("nsys"):
        return None
    name = ""
    for i, arg in enumerate(args):
        if arg.startswith("--session-name="):
            name = arg.split("=", 1)[1]
        elif arg == "--session-name" and i + 1 < len(args):
            name = args[i + 1]
    import re   # here: only an nsys agent's name needs it (the run path does without re)

    match = re.match(_PROFILE_SESSION, name)
    return NsysAgentName(name, int(match.group(1)) if match else None)


# -- membership ---------------------------------------------------------------------------------

class Reason(Choices):
    """Why a process belongs to a run (the value is stored as ``via``)."""

    ROOT = "root"
    PARENT = "parent"
    SESSION = "session"
    PGRP = "pgrp"
    ENV = "env"
    NSYS_AGENT = "nsys-agent"
    RECORDED = "recorded"


@record(frozen=True)
class RunScope:
    """What identifies one run's processes: its root, the session/group the root leads, its id."""

    root_pid: int
    root_sid: int
    root_pgid: int
    root_start: int | None          # None: the root is gone (only its session/group id is known)
    run_id: str | None = None
    nsys_agents: bool = False       # count the run's nsys agents as members
    uid: int = field(default_factory=os.getuid)

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
        # oldest first: a parent is judged before its children, so a child of a member is in by
        # the parent rule whatever order /proc listed them in
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
    processes known to be no member, not read: see :func:`snapshot`)."""
    procs = snapshot(skip) if procs is None else procs
    me = os.getpid()
    pending = {pid: p for pid, p in procs.items() if pid != me and pid not in exclude and not p.is_zombie}
    members: dict[int, Reason] = {}
    scope.adopt(pending, members)
    return {pid: (procs[pid], why) for pid, why in members.items()}

