"""Leaked POSIX shared memory: /dev/shm files that no live process maps or keeps open.

A segment is "in use" when any process maps it (a line of /proc/<pid>/maps with its device and
inode) or holds a file descriptor on it (/proc/<pid>/fd). Named semaphores (``sem.*``) are left
alone: multiprocessing unlinks its own at once, and others belong to programs gpuscope cannot judge.
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


@dataclass
class ShmUsage:
    """Which (dev, ino) pairs live processes use, and who; plus how many processes were unreadable."""

    users: dict[tuple[int, int], list[int]]
    unreadable: list[int]


def list_segments(shm_dir: str = SHM_DIR) -> tuple[list[ShmSegment], int]:
    """Regular files directly in ``shm_dir`` (no directories, no ``sem.*``); and the skipped count."""
    segments: list[ShmSegment] = []
    skipped = 0
    try:
        entries = list(os.scandir(shm_dir))
    except OSError:
        return [], 0
    for entry in entries:
        if entry.name.startswith("sem."):
            skipped += 1
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        segments.append(ShmSegment(
            name=entry.name, path=entry.path, dev=st.st_dev, ino=st.st_ino, uid=st.st_uid,
            size=st.st_size, allocated=st.st_blocks * 512, mtime=st.st_mtime, atime=st.st_atime))
    return segments, skipped


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


def leaked_segments(shm_dir: str = SHM_DIR, min_age_s: float = 10.0,
                    now: float | None = None) -> tuple[list[ShmSegment], ShmUsage, int]:
    """Segments no live process uses, last modified at least ``min_age_s`` ago."""
    now = time.time() if now is None else now
    segments, skipped = list_segments(shm_dir)
    usage = scan_usage({s.dev for s in segments})
    leaked = [s for s in segments
              if (s.dev, s.ino) not in usage.users and now - s.mtime >= min_age_s]
    return leaked, usage, skipped


def segment_evidence(seg: ShmSegment, now: float) -> ShmEvidence:
    return ShmEvidence(
        name=seg.name, path=seg.path, owner=seg.owner, uid=seg.uid, size_bytes=seg.size,
        allocated_bytes=seg.allocated, modified_s_ago=round(now - seg.mtime, 1),
        accessed_s_ago=round(now - seg.atime, 1), creator=shm_creator(seg.name), dev=seg.dev,
        ino=seg.ino)
