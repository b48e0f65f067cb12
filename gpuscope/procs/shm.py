"""``/dev/shm``: its files, which live processes use them, the one safe unlink, and what a run's
processes created and never unlinked (the ``D`` lines of inject/shmwatch.py, as the event-log
reader gives them).

A segment is "in use" when any process maps it (a line of ``/proc/<pid>/maps`` with its device
and inode) or holds a file descriptor on it (``/proc/<pid>/fd``). A named semaphore
(``sem_open``, e.g. a multiprocessing Lock under spawn/forkserver) is the file ``sem.NAME``,
which every process that opened it maps: the same rule judges it, by the same code.

:func:`unlink_refusal` holds the rules for removing one (cleanup's and nsys's both call it):
a plain name directly in the folder, a regular file, still the listed inode, owned by the caller
(or by anyone, when root and allowed), and used by no live process.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuscope.procs.read import all_pids, exists, fd_links, maps_raw, read

SHM_DIR = "/dev/shm"
SEM_PREFIX = "sem."          # glibc's sem_open("/NAME") is the file /dev/shm/sem.NAME


@dataclass
class ShmSegment:
    """One regular file of the shm folder as ``stat`` showed it."""

    name: str
    path: str
    dev: int
    ino: int
    uid: int
    size: int
    allocated: int
    mtime: float
    atime: float

    @property
    def is_semaphore(self) -> bool:
        return self.name.startswith(SEM_PREFIX)


@dataclass
class ShmUsage:
    """Which (dev, ino) pairs live processes use, and who; plus how many processes were unreadable."""

    users: dict[tuple[int, int], list[int]]
    unreadable: list[int]


def list_segments(shm_dir: str = SHM_DIR) -> list[ShmSegment]:
    """Regular files directly in ``shm_dir``: segments and named semaphores (no directories)."""
    segments: list[ShmSegment] = []
    try:
        entries = list(os.scandir(shm_dir))
    except OSError:
        return []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            segments.append(ShmSegment(entry.name, entry.path, st.st_dev, st.st_ino, st.st_uid, st.st_size,
                                       st.st_blocks * 512, st.st_mtime, st.st_atime))
    return segments


def _add(users: dict[tuple[int, int], list[int]], key: tuple[int, int], pid: int) -> None:
    if pid not in users.setdefault(key, []):
        users[key].append(pid)


def _maps_usage(pid: int, users: dict[tuple[int, int], list[int]], devs: set[int]) -> bool:
    data = maps_raw(pid)
    if data is None:
        return False
    for line in data.split(b"\n"):   # bytes: no decoding of every mapping's path
        parts = line.split(None, 5)
        if len(parts) < 6 or parts[4] == b"0":
            continue
        major, _, minor = parts[3].partition(b":")
        try:
            dev = os.makedev(int(major, 16), int(minor, 16))
            if dev in devs:
                _add(users, (dev, int(parts[4])), pid)
        except ValueError:
            continue
    return True


def _fd_usage(pid: int, users: dict[tuple[int, int], list[int]], devs: set[int], shm_dir: str) -> None:
    for link, target in fd_links(pid) or ():
        if not target.startswith(shm_dir + "/"):
            continue
        try:
            st = os.stat(link)
        except OSError:
            continue
        if st.st_dev in devs:
            _add(users, (st.st_dev, st.st_ino), pid)


def scan_usage(devs: set[int], shm_dir: str = SHM_DIR) -> ShmUsage:
    """Every live process's mappings and open files on the filesystems in ``devs``."""
    users: dict[tuple[int, int], list[int]] = {}
    unreadable: list[int] = []
    for pid in all_pids():
        if not _maps_usage(pid, users, devs):
            if exists(pid):
                unreadable.append(pid)
            continue
        _fd_usage(pid, users, devs, shm_dir)
    return ShmUsage(users, unreadable)


def refs_of(pid: int, shm_dir: str = SHM_DIR, *, fds: bool = True) -> set[str]:
    """Paths in ``shm_dir`` that ``pid`` maps or holds open (empty when not readable); without
    ``fds`` only what it maps (a descriptor each costs a readlink: a forked worker holds dozens)."""
    prefix = shm_dir + "/"
    raw = prefix.encode()
    refs = set()
    data = maps_raw(pid)
    if data and raw in data:            # most processes map nothing there: no line is decoded
        for line in data.split(b"\n"):
            i = line.find(raw)
            if i >= 0:
                refs.add(line[i:].decode("utf-8", "replace").removesuffix(" (deleted)"))
    for _, target in (fd_links(pid) or ()) if fds else ():
        if target.startswith(prefix):
            refs.add(target.removesuffix(" (deleted)"))
    return refs


def users_of(path: str) -> list[int]:
    """Live processes that map or hold ``path`` open now."""
    try:
        st = os.lstat(path)
    except OSError:
        return []
    return scan_usage({st.st_dev}, os.path.dirname(path)).users.get((st.st_dev, st.st_ino), [])


def unlink_refusal(path: str, ident: tuple[int, int] | None = None, *, allow_other_users: bool = False,
                   usage: ShmUsage | None = None) -> str | None:
    """Why ``path`` may not be unlinked now (one line), or None. ``ident``: the (dev, ino) it was
    listed with; ``usage``: a scan taken just before (else one is taken). Raises
    FileNotFoundError when it is gone."""
    name = os.path.basename(path)
    if not name or name in (".", "..") or os.path.dirname(path) != os.path.dirname(os.path.abspath(path)):
        return f"refusing: {path!r} is not a shared memory segment path"
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return f"refusing: {path} is not a regular file"
    if ident is not None and (st.st_dev, st.st_ino) != ident:
        return f"refusing: {path} was replaced since it was listed (inode changed)"
    euid = os.geteuid()
    if st.st_uid != euid and not (euid == 0 and allow_other_users):
        return f"refusing: {path} belongs to another user (uid {st.st_uid})"
    if usage is None:
        usage = scan_usage({st.st_dev}, os.path.dirname(path))
    users = usage.users.get((st.st_dev, st.st_ino), [])
    if users:
        user = read(users[0])
        return f"refusing: {path} is in use by pid {users[0]}" + (f" ({user.comm})" if user else "")
    return None


def remove_unused(paths: set[str]) -> list[str]:
    """Delete those of ``paths`` that :func:`unlink_refusal` allows; returns what was deleted."""
    devs = set()
    for path in paths:
        try:
            devs.add(os.lstat(path).st_dev)
        except OSError:
            continue
    if not devs:
        return []
    usage = scan_usage(devs, os.path.dirname(min(paths)))
    removed = []
    for path in sorted(paths):
        try:
            if unlink_refusal(path, usage=usage) is None:
                os.unlink(path)
                removed.append(path)
        except OSError:
            continue
    return removed


@dataclass(frozen=True)
class ShmMade:
    """A segment (``kind`` "shm") or named semaphore ("sem") a process of a run created."""

    name: str            # the file name in /dev/shm
    kind: str
    size: int | None
    pid: int
    where: str           # the user's file:line that created it ("" when unknown)
    t_ns: int

    def describe(self) -> str:
        what = "shared memory segment" if self.kind == "shm" else "named semaphore"
        size = f" of {self.size} bytes" if self.size else ""
        at = f" at {self.where}" if self.where else ""
        return f"{what} /dev/shm/{self.name}{size}, created by pid {self.pid}{at}"


def left_by(events: Iterable[Any]) -> list[ShmMade]:
    """What the run's processes created and none of them unlinked, in creation order (a
    segment may be unlinked by another process than its creator). ``events``: each with ``pid``
    and ``shm`` (``trace.events.ProcessEvents``, which this layer does not import)."""
    lines = sorted(((t, pe.pid, info) for pe in events for t, info in pe.shm),
                   key=lambda item: item[0])
    made: dict[str, ShmMade] = {}
    for t, pid, info in lines:
        name = str(info.get("name") or "")
        if not name:
            continue
        if info.get("op") == "create":
            size = info.get("size")
            made[name] = ShmMade(name, str(info.get("kind") or "shm"), int(size) if size else None, pid,
                                 str(info.get("where") or ""), t)
        elif info.get("op") == "unlink":
            made.pop(name, None)
    return list(made.values())


def still_present(made: Iterable[ShmMade], shm_dir: str = SHM_DIR) -> list[ShmMade]:
    """Those of ``made`` whose file is still in ``shm_dir``."""
    return [m for m in made if os.path.isfile(os.path.join(shm_dir, m.name))]


