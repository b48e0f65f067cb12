"""Leaked POSIX shared memory and named semaphores: /dev/shm files no live process maps or keeps open.

A segment is "in use" when any process maps it (a line of /proc/<pid>/maps with its device and
inode) or holds a file descriptor on it (/proc/<pid>/fd). A named semaphore (``sem_open``, e.g.
a multiprocessing Lock under spawn/forkserver) is the file ``sem.NAME``, which every process that
opened it maps: the same rule judges it, by the same code.

Files younger than :data:`SHM_MIN_AGE_S` are not judged: their creator may not have mapped them
yet (``shm_open`` + ``ftruncate`` + ``mmap``), or may be about to hand the name to another process.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

from gpuscope.cleanup.model import ShmEvidence
from gpuscope.cleanup.patterns import shm_creator
from gpuscope.cleanup.snapshot import user_name
from gpuscope.processes import all_pids

SHM_DIR = "/dev/shm"
SEM_PREFIX = "sem."          # glibc's sem_open("/NAME") is the file /dev/shm/sem.NAME
# Segments and semaphores unmodified for less than this are not judged yet (the CLI's
# --shm-min-age and the Cleanup tab's note use it).
SHM_MIN_AGE_S = 10.0


@dataclass
class ShmSegment:
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
    def owner(self) -> str:
        return user_name(self.uid)

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
        if not stat.S_ISREG(st.st_mode):
            continue
        segments.append(ShmSegment(
            name=entry.name, path=entry.path, dev=st.st_dev, ino=st.st_ino, uid=st.st_uid,
            size=st.st_size, allocated=st.st_blocks * 512, mtime=st.st_mtime, atime=st.st_atime))
    return segments


def _maps_usage(pid: int, users: dict[tuple[int, int], list[int]], devs: set[int]) -> bool:
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6 or parts[4] == "0":
                    continue
                major, _, minor = parts[3].partition(":")
                dev = os.makedev(int(major, 16), int(minor, 16))
                if dev in devs:
                    key = (dev, int(parts[4]))
                    if pid not in users.setdefault(key, []):
                        users[key].append(pid)
    except (OSError, ValueError):
        return False
    return True


def _fd_usage(pid: int, users: dict[tuple[int, int], list[int]], devs: set[int]) -> None:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return
    for fd in fds:
        link = f"/proc/{pid}/fd/{fd}"
        try:
            if not os.readlink(link).startswith(SHM_DIR + "/"):
                continue
            st = os.stat(link)
        except OSError:
            continue
        if st.st_dev in devs:
            key = (st.st_dev, st.st_ino)
            if pid not in users.setdefault(key, []):
                users[key].append(pid)


def scan_usage(devs: set[int]) -> ShmUsage:
    """Every live process's mappings and open files on the filesystems in ``devs``."""
    users: dict[tuple[int, int], list[int]] = {}
    unreadable: list[int] = []
    for pid in all_pids():
        if not _maps_usage(pid, users, devs):
            if os.path.exists(f"/proc/{pid}"):
                unreadable.append(pid)
            continue
        _fd_usage(pid, users, devs)
    return ShmUsage(users, unreadable)


def leaked_segments(shm_dir: str = SHM_DIR, min_age_s: float = SHM_MIN_AGE_S,
                    now: float | None = None) -> tuple[list[ShmSegment], ShmUsage, list[ShmSegment]]:
    """Segments and semaphores no live process uses, last modified at least ``min_age_s`` ago;
    the usage scan; and the unused ones held back because they are younger than that."""
    now = time.time() if now is None else now
    segments = list_segments(shm_dir)
    usage = scan_usage({s.dev for s in segments})
    unused = [s for s in segments if (s.dev, s.ino) not in usage.users]
    leaked = [s for s in unused if now - s.mtime >= min_age_s]
    young = [s for s in unused if now - s.mtime < min_age_s]
    return leaked, usage, young


def segment_evidence(seg: ShmSegment, now: float) -> ShmEvidence:
    return ShmEvidence(
        name=seg.name, path=seg.path, owner=seg.owner, uid=seg.uid, size_bytes=seg.size,
        allocated_bytes=seg.allocated, modified_s_ago=round(now - seg.mtime, 1),
        accessed_s_ago=round(now - seg.atime, 1), creator=shm_creator(seg.name), dev=seg.dev,
        ino=seg.ino, semaphore=seg.is_semaphore)
