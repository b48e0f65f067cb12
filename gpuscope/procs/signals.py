"""Signalling a process by its identity: a signal never reaches a reused pid.

A :class:`ProcHandle` opens a pidfd (``os.pidfd_open``, Linux 5.3) *before* it checks the
process's start time: from then on the descriptor names that process whatever happens to its
pid. Where pidfds are missing, each signal is preceded by a fresh start-time check (a small
window remains; the docs say so). :func:`terminate` escalates SIGTERM -> SIGKILL over a set of
:class:`~gpuscope.procs.key.ProcKey`.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Iterable

from gpuscope.procs.key import ProcKey
from gpuscope.procs.read import read


class ProcGoneError(Exception):
    """The process has exited, or its pid now names another process."""


class ProcHandle:
    """One process, verified to be ``key``; close it (or use it as a context manager)."""

    def __init__(self, key: ProcKey) -> None:
        self.key = key
        self.fd: int | None = None
        if key.pid <= 0:
            raise ProcGoneError(f"{key.pid} is not a process id")
        try:
            self.fd = os.pidfd_open(key.pid)
        except ProcessLookupError:
            raise ProcGoneError(f"pid {key.pid} is gone") from None
        except (AttributeError, OSError):
            self.fd = None
        if not self.is_same():               # checked after the pidfd is open: it names this process
            self.close()
            raise ProcGoneError(f"pid {key.pid} now names another process (start time changed)")

    def __enter__(self) -> ProcHandle:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def is_same(self) -> bool:
        info = read(self.key.pid)
        return info is not None and info.start_ticks == self.key.start

    def ended(self) -> bool:
        """Exited (a zombie counts: it runs no more) or gone."""
        info = read(self.key.pid)
        return info is None or info.start_ticks != self.key.start or info.is_zombie

    def send(self, sig: int) -> None:
        """Send ``sig``. Raises ProcessLookupError when the process is gone (or its pid names
        another process now), PermissionError when not permitted."""
        if self.fd is not None:
            signal.pidfd_send_signal(self.fd, sig)
            return
        if not self.is_same():
            raise ProcessLookupError(f"pid {self.key.pid} is gone")
        os.kill(self.key.pid, sig)

    def try_send(self, sig: int) -> bool:
        """:meth:`send`; False instead of an error when gone or not permitted."""
        try:
            self.send(sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def wait_exit(self, timeout: float) -> bool:
        """Wait until the process has exited (zombie or gone); True when it has."""
        if self.fd is not None:
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            if poller.poll(max(0, int(timeout * 1000))):
                return True
            return self.ended()
        end = time.monotonic() + timeout
        while not self.ended():
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def send_signal(key: ProcKey, sig: int) -> bool:
    """Send ``sig`` to the process ``key`` names (never to a process that got its pid later);
    False when it is gone or not permitted."""
    try:
        with ProcHandle(key) as handle:
            return handle.try_send(sig)
    except ProcGoneError:
        return False


def handles(keys: Iterable[ProcKey]) -> list[ProcHandle]:
    """Handles on those of ``keys`` that still name their process."""
    out = []
    for key in keys:
        try:
            out.append(ProcHandle(key))
        except ProcGoneError:
            continue
    return out


def terminate(keys: Iterable[ProcKey], grace_s: float, watch: Callable[[], None] | None = None,
              kill_wait_s: float = 2.0) -> set[ProcKey]:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns the keys still running afterwards.

    ``watch`` is called while waiting. Nothing is reaped here: a caller that holds a ``Popen``
    for one of them must keep its exit status.
    """
    held = handles(keys)
    try:
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
            for h in held:
                if not h.ended():
                    h.try_send(sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and not all(h.ended() for h in held):
                if watch:
                    watch()
                time.sleep(0.05)
            if all(h.ended() for h in held):
                break
        return {h.key for h in held if not h.ended()}
    finally:
        for h in held:
            h.close()
