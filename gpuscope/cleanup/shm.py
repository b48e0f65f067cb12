"""Leaked POSIX shared memory and named semaphores: /dev/shm files no live process maps or keeps open.

Who uses a file is :mod:`gpuscope.procs.shm`'s scan (mappings and descriptors of every live
process); a named semaphore (``sem.NAME``) is judged by the same rule.

Files younger than :data:`SHM_MIN_AGE_S` are not judged: their creator may not have mapped them
yet (``shm_open`` + ``ftruncate`` + ``mmap``), or may be about to hand the name to another process.
"""

from __future__ import annotations

import time

from gpuscope.cleanup.model import ShmEvidence
from gpuscope.cleanup.patterns import shm_creator
from gpuscope.cleanup.snapshot import user_name
from gpuscope.procs.shm import SEM_PREFIX, SHM_DIR, ShmSegment, ShmUsage, list_segments, scan_usage

__all__ = ["SEM_PREFIX", "SHM_DIR", "SHM_MIN_AGE_S", "ShmSegment", "ShmUsage", "leaked_segments",
           "list_segments", "scan_usage", "segment_evidence"]

# Segments and semaphores unmodified for less than this are not judged yet (the CLI's
# --shm-min-age and the Cleanup tab's note use it).
SHM_MIN_AGE_S = 10.0


def leaked_segments(shm_dir: str = SHM_DIR, min_age_s: float = SHM_MIN_AGE_S,
                    now: float | None = None) -> tuple[list[ShmSegment], ShmUsage, list[ShmSegment]]:
    """Segments and semaphores no live process uses, last modified at least ``min_age_s`` ago;
    the usage scan; and the unused ones held back because they are younger than that."""
    now = time.time() if now is None else now
    segments = list_segments(shm_dir)
    usage = scan_usage({s.dev for s in segments}, shm_dir)
    unused = [s for s in segments if (s.dev, s.ino) not in usage.users]
    leaked = [s for s in unused if now - s.mtime >= min_age_s]
    young = [s for s in unused if now - s.mtime < min_age_s]
    return leaked, usage, young


def segment_evidence(seg: ShmSegment, now: float) -> ShmEvidence:
    return ShmEvidence(
        name=seg.name, path=seg.path, owner=user_name(seg.uid), uid=seg.uid, size_bytes=seg.size,
        allocated_bytes=seg.allocated, modified_s_ago=round(now - seg.mtime, 1),
        accessed_s_ago=round(now - seg.atime, 1), creator=shm_creator(seg.name), dev=seg.dev,
        ino=seg.ino, semaphore=seg.is_semaphore)
