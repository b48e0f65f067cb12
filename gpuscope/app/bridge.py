"""The one place where work on other threads reaches the GUI thread.

* ``to_gui(fn, *args)`` posts a call to the GUI thread through a queued ``Signal(object)``;
  workers (:mod:`gpuscope.app.workers`) deliver their results this way.
* :class:`RunBridge` receives a run's callbacks on the core's threads (output pumps, sampler,
  supervisor, findings recorder) and keeps what arrives in bounded buffers under a lock. The GUI's refresh timer
  drains them about ten times a second, so a flood of output or samples costs one append per
  chunk on the producing thread and one batched update per tick on the GUI thread. Output chunks
  carry their line count, counted on the producing thread; the pending output is bounded in
  bytes and in lines (older lines than the console's scrollback could never be shown): the oldest
  chunks are dropped whole, and the drain says, per stream, how much and whether a line was cut.

No widget is ever touched from another thread; nothing else in the app crosses threads.
"""

from __future__ import annotations

import threading
from collections import deque
from functools import partial
from typing import Any, Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal

MAX_PENDING_OUTPUT = 8 << 20   # bytes of output kept between two GUI ticks (the logs keep all)
MAX_PENDING_LINES = 5_000      # lines kept between two GUI ticks (more than the console shows in one)
JOIN_BYTES = 64 << 10          # a stream's consecutive chunks are joined up to this size
JOIN_LINES = 1_000             # ... and this many lines (fewer items; drops stay fine-grained)
MAX_PENDING_BATCHES = 10_000


class _Relay(QObject):
    sigCall = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.sigCall.connect(self._call, Qt.ConnectionType.QueuedConnection)

    @staticmethod
    def _call(fn: Callable[[], Any]) -> None:
        fn()


_relay: _Relay | None = None


def install() -> None:
    """Create the relay on the GUI thread (the main window does it; idempotent)."""
    global _relay
    app = QCoreApplication.instance()
    if app is None or QThread.currentThread() is not app.thread():
        raise RuntimeError("bridge.install() must run on the GUI thread")
    if _relay is None:
        _relay = _Relay()


def to_gui(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``fn(*args, **kwargs)`` soon on the GUI thread (from any thread)."""
    if _relay is None:
        raise RuntimeError("bridge.install() was not called")
    try:
        _relay.sigCall.emit(partial(fn, *args, **kwargs))
    except RuntimeError:   # the relay is gone: the app is shutting down, nobody is left to tell
        pass


class RunBridge(QObject):
    """Buffers a run's output and sample batches for the GUI; progress lines as a signal."""

    sigProgress = Signal(object)   # str, queued to the GUI thread

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._output: deque[list[Any]] = deque()      # [stream, bytearray, lines]
        self._output_bytes = 0
        self._output_lines = 0
        self._dropped: dict[str, tuple[int, int, bool]] = {}   # stream: (bytes, lines, ends in mid-line)
        self._batches: deque[Any] = deque(maxlen=MAX_PENDING_BATCHES)
        self._findings: list[Any] = []

    # -- called on the core's threads -------------------------------------------------------------
    def on_output(self, stream: str, chunk: bytes) -> None:
        lines = chunk.count(b"\n")      # here, not on the GUI thread
        with self._lock:
            out = self._output
            last = out[-1] if out else None
            if last is not None and last[0] == stream and len(last[1]) < JOIN_BYTES and last[2] < JOIN_LINES:
                last[1] += chunk          # a pty gives 4 KB reads: join them (amortised, no copy back)
                last[2] += lines
            else:
                out.append([stream, bytearray(chunk), lines])
            self._output_bytes += len(chunk)
            self._output_lines += lines
            while len(out) > 1 and (self._output_bytes > MAX_PENDING_OUTPUT or
                                    self._output_lines - out[0][2] >= MAX_PENDING_LINES):
                name, old, n = out.popleft()
                self._output_bytes -= len(old)
                self._output_lines -= n
                nbytes, nlines, _ = self._dropped.get(name, (0, 0, False))
                self._dropped[name] = (nbytes + len(old), nlines + n, not old.endswith(b"\n"))

    def on_batch(self, batch: Any) -> None:
        with self._lock:
            self._batches.append(batch)

    def on_finding(self, finding: Any) -> None:
        """A new finding (the findings recorder's ``on_finding``, on its threads)."""
        with self._lock:
            self._findings.append(finding)

    def on_progress(self, message: str) -> None:
        self.sigProgress.emit(message)

    # -- called on the GUI thread -----------------------------------------------------------------
    def drain_output(self) -> tuple[list[list[Any]], dict[str, tuple[int, int, bool]]]:
        """Pending [stream, chunk, lines] (chunk: a bytearray), and what was dropped since the last drain:
        {stream: (bytes, lines, whether the last dropped chunk ended in mid-line)}."""
        with self._lock:
            out, self._output = list(self._output), deque()
            dropped, self._dropped = self._dropped, {}
            self._output_bytes = self._output_lines = 0
        return out, dropped

    def drain_findings(self) -> list[Any]:
        with self._lock:
            out, self._findings = self._findings, []
        return out

    def drain_batches(self) -> list[Any]:
        with self._lock:
            out = list(self._batches)
            self._batches.clear()
        return out
