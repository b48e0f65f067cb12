"""What a running run streams to a front end, kept in bounded buffers until it is drained (Qt-free).

The core calls ``on_output`` / ``on_batch`` / ``on_finding`` / ``on_progress`` on its own threads
(output pumps, sampler, supervisor, findings recorder); each costs one append under a lock. The
front end drains the buffers at its own pace (the app's timer, about ten times a second), so a
flood of output or samples becomes one batched update per drain. Output chunks carry their line
count, counted on the producing thread; pending output is bounded in bytes and in lines (lines
older than a console's scrollback could never be shown): the oldest chunks are dropped whole, and
the drain says, per stream, how much and whether a line was cut.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.finding import Finding

MAX_PENDING_OUTPUT = 8 << 20   # bytes of output kept between two drains (the logs keep all)
MAX_PENDING_LINES = 5_000      # lines kept between two drains (more than the console shows in one)
JOIN_BYTES = 64 << 10          # a stream's consecutive chunks are joined up to this size
JOIN_LINES = 1_000             # ... and this many lines (fewer items; drops stay fine-grained)
MAX_PENDING_BATCHES = 10_000
MAX_PENDING_PROGRESS = 1_000

Dropped = dict[str, tuple[int, int, bool]]     # stream: (bytes, lines, whether it ends in mid-line)


class RunStream:
    """Bounded buffers of one run's output chunks, telemetry batches, findings and progress lines."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._output: deque[list[Any]] = deque()      # [stream, bytearray, lines]
        self._output_bytes = 0
        self._output_lines = 0
        self._dropped: Dropped = {}
        self._batches: deque[Any] = deque(maxlen=MAX_PENDING_BATCHES)
        self._findings: list[Finding] = []
        self._progress: deque[str] = deque(maxlen=MAX_PENDING_PROGRESS)

    # -- called on the core's threads -------------------------------------------------------------
    def on_output(self, stream: str, chunk: bytes) -> None:
        lines = chunk.count(b"\n")      # here, not on the front end's thread
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

    def on_finding(self, finding: Finding) -> None:
        """A new finding (the findings recorder's ``on_finding``, on its threads)."""
        with self._lock:
            self._findings.append(finding)

    def on_progress(self, message: str) -> None:
        with self._lock:
            self._progress.append(message)

    # -- called by the front end ------------------------------------------------------------------
    def drain_output(self) -> tuple[list[list[Any]], Dropped]:
        """Pending [stream, chunk, lines] (chunk: a bytearray), and what was dropped since the last
        drain: {stream: (bytes, lines, whether the last dropped chunk ended in mid-line)}."""
        with self._lock:
            out, self._output = list(self._output), deque()
            dropped, self._dropped = self._dropped, {}
            self._output_bytes = self._output_lines = 0
        return out, dropped

    def drain_findings(self) -> list[Finding]:
        with self._lock:
            out, self._findings = self._findings, []
        return out

    def drain_batches(self) -> list[Any]:
        with self._lock:
            out = list(self._batches)
            self._batches.clear()
        return out

    def drain_progress(self) -> list[str]:
        with self._lock:
            out = list(self._progress)
            self._progress.clear()
        return out
