"""One ``nsys profile`` at a time on this machine.

Two profiling sessions running at once on these nsys builds mixed each other's data: an export
picked up the other session's strings and "No NVTX events collected" (seen in the test suites).
gpuscope therefore serialises its own recordings with an advisory lock that every gpuscope
process (and the test suites) take around profile, import and export.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import Callable

LOCK_PATH = "/tmp/gpuscope-nsys-profile.lock"


class NsysLock:
    """``acquire(timeout_s, waiting)`` then ``release()``; also a context manager (no timeout)."""

    def __init__(self, path: str = LOCK_PATH) -> None:
        self.path = path
        self._fd = -1

    def acquire(self, timeout_s: float | None = None, waiting: Callable[[str], None] | None = None,
                cancelled: Callable[[], bool] | None = None) -> bool:
        """Wait for the lock; False on timeout or when ``cancelled()`` turns true."""
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            self._fd = os.open(self.path, os.O_RDONLY)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        told = False
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if not told and waiting is not None:
                    waiting("another nsys recording is running on this machine; waiting for it to finish")
                    told = True
                if (deadline is not None and time.monotonic() > deadline) or (cancelled and cancelled()):
                    os.close(self._fd)
                    self._fd = -1
                    return False
                time.sleep(0.2)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "NsysLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
