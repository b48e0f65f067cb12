"""A snapshot of the machine's processes, read through psutil and /proc.

Only what cleanup needs: identity (pid + create time), owner, command line, state, memory,
CPU time, session, and on demand the environment, open /dev/nvidia* files and "last ran".
"""

from __future__ import annotations

import os
import pwd
import time
from dataclasses import dataclass, field

import psutil

_ATTRS = ["pid", "ppid", "name", "cmdline", "uids", "create_time", "status", "memory_info",
          "cpu_times", "num_threads"]


@dataclass
class ProcInfo:
    pid: int
    ppid: int
    name: str
    cmdline: list[str]
    uid: int
    create_time: float
    status: str
    rss: int
    cpu_time: float
    num_threads: int
    sid: int | None = None
    _env: dict[str, str] | None = field(default=None, repr=False)
    _env_read: bool = field(default=False, repr=False)

    @property
    def cmd(self) -> str:
        """The command line as one string (the name in brackets when it has none)."""
        return " ".join(self.cmdline) if self.cmdline else f"[{self.name}]"

    @property
    def user(self) -> str:
        return user_name(self.uid)

    @property
    def is_zombie(self) -> bool:
        return self.status == psutil.STATUS_ZOMBIE

    @property
    def is_kernel_thread(self) -> bool:
        return self.pid == 2 or self.ppid == 2

    def environ(self) -> dict[str, str]:
        """The process environment from /proc (empty when not permitted or gone)."""
        if not self._env_read:
            self._env_read = True
            self._env = read_environ(self.pid)
        return self._env or {}


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def read_environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _from_psutil(info: dict) -> ProcInfo | None:
    if info.get("create_time") is None or info.get("uids") is None:
        return None
    mem = info.get("memory_info")
    cpu = info.get("cpu_times")
    try:
        sid = os.getsid(info["pid"])
    except OSError:
        sid = None
    return ProcInfo(
        pid=info["pid"], ppid=info.get("ppid") or 0, name=info.get("name") or "",
        cmdline=list(info.get("cmdline") or []), uid=info["uids"].real,
        create_time=float(info["create_time"]), status=info.get("status") or "?",
        rss=int(mem.rss) if mem else 0,
        cpu_time=float(cpu.user + cpu.system) if cpu else 0.0,
        num_threads=int(info.get("num_threads") or 0), sid=sid,
    )


def read_process(pid: int) -> ProcInfo | None:
    """One process now, or None when it does not exist."""
    try:
        proc = psutil.Process(pid)
        info = proc.as_dict(attrs=_ATTRS)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, ValueError):
        return None
    except psutil.AccessDenied:
        return None
    return _from_psutil(info)


class ProcTable:
    """All processes at one moment (monotonic time ``at``), indexed by pid."""

    def __init__(self, procs: dict[int, ProcInfo], at: float) -> None:
        self.procs = procs
        self.at = at

    @classmethod
    def take(cls) -> "ProcTable":
        procs: dict[int, ProcInfo] = {}
        for p in psutil.process_iter(_ATTRS, ad_value=None):
            info = _from_psutil(p.info)
            if info is not None:
                procs[info.pid] = info
        return cls(procs, time.monotonic())

    def get(self, pid: int) -> ProcInfo | None:
        return self.procs.get(pid)

    def __iter__(self):
        return iter(self.procs.values())

    def children(self, pid: int) -> list[ProcInfo]:
        return [p for p in self.procs.values() if p.ppid == pid]


def ancestors(pid: int) -> list[int]:
    """Ancestors of ``pid`` read now from /proc, nearest first (ends with 1 or 0)."""
    out: list[int] = []
    seen = {pid}
    cur = pid
    while True:
        try:
            ppid = psutil.Process(cur).ppid()
        except (psutil.Error, ValueError):
            break
        if ppid <= 0 or ppid in seen:
            break
        out.append(ppid)
        seen.add(ppid)
        cur = ppid
    return out


def last_ran_s_ago(pid: int) -> float | None:
    """Seconds since any thread of ``pid`` last ran on a CPU (from /proc/<pid>/task/*/sched).

    ``se.exec_start`` is the scheduler clock in ms, which on Linux tracks CLOCK_MONOTONIC.
    Returns None where the kernel does not expose it.
    """
    latest = None
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids[:256]:
        try:
            with open(f"/proc/{pid}/task/{tid}/sched", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("se.exec_start"):
                        value = float(line.split(":", 1)[1])
                        latest = value if latest is None else max(latest, value)
                        break
        except (OSError, ValueError):
            continue
    if latest is None:
        return None
    return max(0.0, time.clock_gettime(time.CLOCK_MONOTONIC) - latest / 1000.0)


def nvidia_files_open(pid: int) -> bool | None:
    """Whether ``pid`` has a /dev/nvidia* device open (None when its fds cannot be read)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia"):
                return True
        except OSError:
            continue
    return False
