"""Reading one process: :class:`ProcInfo` (the one ``/proc/<pid>/stat`` parser), its command
line, environment, owner, status fields, descriptors, mappings and namespaced pids.

Zombies count as gone for :func:`alive` (they hold no memory and cannot be signalled away; PID 1
may never reap them in a container).
"""

from __future__ import annotations

import os
import time
from collections.abc import Container
from dataclasses import dataclass
from functools import cached_property

from gpuscope.procs.files import host_file, list_pids, pid_path, read_bytes
from gpuscope.procs.key import ProcKey

CLK_TCK = os.sysconf("SC_CLK_TCK")
ENDED_STATES = ("Z", "X", "x")   # a zombie (ended, not yet waited for) or dead: the process has ended
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_PF_KTHREAD = 0x00200000

# /proc/<pid>/stat state letters as the words psutil uses (cleanup shows them).
_STATUS = {"R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop",
           "Z": "zombie", "X": "dead", "x": "dead", "K": "wake-kill", "W": "waking", "P": "parked",
           "I": "idle"}

_BOOT: list[float] = []


def boot_time() -> float:
    """Host boot time (seconds since the epoch), to turn start ticks into a create time."""
    if not _BOOT:
        for line in (read_bytes(host_file("stat"), 65536) or b"").split(b"\n"):
            if line.startswith(b"btime "):
                _BOOT.append(float(line.split()[1]))
                break
        else:
            return 0.0
    return _BOOT[0]


@dataclass(frozen=True)
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
    def key(self) -> ProcKey:
        return ProcKey(self.pid, self.start_ticks)

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

    @cached_property
    def cmdline(self) -> tuple[str, ...]:
        return cmdline(self.pid)

    @property
    def cmd(self) -> str:
        """The command line as one string (the name in brackets when it has none)."""
        return " ".join(self.cmdline) if self.cmdline else f"[{self.comm}]"

    @cached_property
    def environ(self) -> dict[str, str]:
        """The initial environment (empty when not permitted or gone)."""
        return environ(self.pid)

    @cached_property
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
    if pid <= 0:
        return None
    data = read_bytes(pid_path(pid, "stat"), 1024)
    return parse_stat(pid, data) if data else None


def start_ticks_at(create_time: float) -> int:
    """The start ticks of a process whose :attr:`ProcInfo.create_time` was ``create_time``."""
    return round((create_time - boot_time()) * CLK_TCK)


def key_of(pid: int) -> ProcKey | None:
    """The identity of ``pid`` now, or None when there is no such process."""
    info = read(pid)
    return info.key if info is not None else None


def is_same(key: ProcKey) -> bool:
    """Whether ``key``'s process still exists (a reused pid is another process)."""
    info = read(key.pid)
    return info is not None and info.start_ticks == key.start


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    info = read(pid)
    return info is not None and not info.is_zombie


def exists(pid: int) -> bool:
    """Whether ``/proc`` has an entry for ``pid`` (zombies included)."""
    return pid > 0 and os.path.exists(pid_path(pid))


def all_pids() -> list[int]:
    return [int(d) for d in list_pids()]


def snapshot(skip: Container[str] = ()) -> dict[int, ProcInfo]:
    """Every process now, by pid; ``skip``: pids (as /proc names them) not to read
    (:meth:`gpuscope.procs.existing.Existing.skippable`: processes known not to be a run's)."""
    out = {}
    for name in list_pids():
        if name in skip:
            continue
        info = read(int(name))
        if info is not None:
            out[int(name)] = info
    return out


def cmdline(pid: int) -> tuple[str, ...]:
    data = read_bytes(pid_path(pid, "cmdline"), 65536) or b""
    return tuple(a.decode("utf-8", "replace") for a in data.split(b"\0") if a)


def environ(pid: int) -> dict[str, str]:
    """The process's initial environment (empty when not permitted or gone)."""
    env: dict[str, str] = {}
    for item in (read_bytes(pid_path(pid, "environ"), 65536) or b"").split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def environ_raw(pid: int) -> bytes | None:
    """The environment block as the kernel keeps it, or None when not permitted or gone."""
    return read_bytes(pid_path(pid, "environ"), 65536)


def environ_has(pid: int, entry: bytes) -> bool:
    """Whether ``KEY=value`` is one of the process's initial environment entries."""
    data = environ_raw(pid)
    if not data:
        return False
    return data.startswith(entry + b"\0") or (b"\0" + entry + b"\0") in data or data == entry


def owner(pid: int) -> int | None:
    try:
        return os.stat(pid_path(pid)).st_uid
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


def status_fields(pid: int | str) -> dict[str, str]:
    """``/proc/<pid>/status`` as name -> text after the colon (empty when not readable)."""
    out: dict[str, str] = {}
    for line in (read_bytes(pid_path(pid, "status"), 65536) or b"").decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition(":")
        if sep:
            out[name] = value.strip()
    return out


def nspids(pid: int | str) -> tuple[int, ...]:
    """``NSpid`` of the process: its pid in each pid namespace, outermost (the reader's) first;
    empty when the kernel does not say (before 4.1) or the process is gone."""
    try:
        return tuple(int(x) for x in status_fields(pid).get("NSpid", "").split())
    except ValueError:
        return ()


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for ``signum`` (bit ``signum - 1`` of SigCgt)."""
    try:
        return bool(int(status_fields(pid)["SigCgt"], 16) >> (signum - 1) & 1)
    except (KeyError, ValueError):
        return False


def uss_bytes(pid: int) -> int | None:
    """Unique set size: Private_Clean + Private_Dirty + Private_Hugetlb of smaps_rollup."""
    data = read_bytes(pid_path(pid, "smaps_rollup"), 65536)
    if not data:
        return None
    total = 0
    for line in data.split(b"\n"):
        if line.startswith(b"Private_"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total += int(parts[1]) * 1024
    return total


def fd_links(pid: int) -> list[tuple[str, str]] | None:
    """(link path, target) of each open descriptor (None when not permitted or gone). The link
    path can be ``os.stat``-ed to reach the open file itself."""
    try:
        fds = os.listdir(pid_path(pid, "fd"))
    except OSError:
        return None
    out = []
    for fd in fds:
        link = pid_path(pid, "fd", fd)
        try:
            out.append((link, os.readlink(link)))
        except OSError:
            continue
    return out


def open_files(pid: int) -> list[str]:
    """Paths of the regular files ``pid`` holds open (empty when not permitted or gone)."""
    return [target for _, target in fd_links(pid) or () if target.startswith("/") and os.path.isfile(target)]


def nvidia_files_open(pid: int) -> bool | None:
    """Whether ``pid`` has a /dev/nvidia* device open (None when its fds cannot be read)."""
    links = fd_links(pid)
    if links is None:
        return None
    return any(target.startswith("/dev/nvidia") for _, target in links)


def maps_raw(pid: int) -> bytes | None:
    """The bytes of ``/proc/<pid>/maps`` (None when not permitted or gone)."""
    return read_bytes(pid_path(pid, "maps"), 65536)


def maps_lines(pid: int) -> list[str] | None:
    """The lines of ``/proc/<pid>/maps`` (None when not permitted or gone)."""
    data = maps_raw(pid)
    if data is None:
        return None
    return data.decode("utf-8", "replace").splitlines()


def last_ran_s_ago(pid: int) -> float | None:
    """Seconds since any thread of ``pid`` last ran on a CPU (from /proc/<pid>/task/*/sched).

    ``se.exec_start`` is the scheduler clock in ms, which on Linux tracks CLOCK_MONOTONIC.
    Returns None where the kernel does not expose it.
    """
    latest = None
    try:
        tids = os.listdir(pid_path(pid, "task"))
    except OSError:
        return None
    for tid in tids[:256]:
        data = read_bytes(pid_path(pid, "task", tid, "sched"), 65536)
        for line in (data or b"").decode("ascii", "replace").splitlines():
            if line.startswith("se.exec_start"):
                try:
                    value = float(line.split(":", 1)[1])
                except ValueError:
                    break
                latest = value if latest is None else max(latest, value)
                break
    if latest is None:
        return None
    return max(0.0, time.clock_gettime(time.CLOCK_MONOTONIC) - latest / 1000.0)
