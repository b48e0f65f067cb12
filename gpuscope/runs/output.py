"""The program's stdout/stderr: relayed to listeners byte for byte and saved, capped, in the run folder.

The program's environment is never changed to get its output live (no ``PYTHONUNBUFFERED``):
when someone watches it live, its stdout is a pseudo-terminal, which gives it the line buffering it
has in a terminal; the pty's output processing is off, so the bytes are the program's own (no
``\\r\\n``). Otherwise a pipe (block-buffered, as under ``python script.py | cat``). stderr is
always a separate pipe.

Saved output is capped per stream (``GPUSCOPE_OUTPUT_CAP_MB``, default 64 MB; ``0`` keeps all):
the first and the last half are kept and a line in between says how many bytes were dropped.
The relay to listeners is never capped. The descriptors themselves (the pty or the pipe) are
opened by :mod:`gpuscope.runs.pipes`.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Callable

    OutputListener = Callable[[str, bytes], None]  # (stream name "stdout"/"stderr", chunk)

CAP_ENV = "GPUSCOPE_OUTPUT_CAP_MB"
DEFAULT_CAP_MB = 64.0
READ_SIZE = 1 << 20


def output_cap_bytes(environ: dict[str, str] | None = None) -> int | None:
    """The per-stream cap from ``GPUSCOPE_OUTPUT_CAP_MB`` (None: no cap). Bad values: the default."""
    text = (os.environ if environ is None else environ).get(CAP_ENV, "")
    try:
        mb = float(text) if text.strip() else DEFAULT_CAP_MB
    except ValueError:
        mb = DEFAULT_CAP_MB
    return None if mb <= 0 else max(2, int(mb * 1024 * 1024))


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


class CappedLog:
    """A log file that keeps the first ``cap // 2`` bytes, then the last ``cap - cap // 2``.

    The tail is a queue of the chunks as read (no copy per chunk); whole chunks fall off its front
    once the rest still holds the tail, and only the last chunk's cut is copied, at close."""

    def __init__(self, path: str, cap_bytes: int | None):
        self._fh = open(path, "wb", buffering=0, opener=_private)   # as the run's end makes it (0600)
        self._head_left = cap_bytes // 2 if cap_bytes else -1
        self._tail_cap = (cap_bytes - cap_bytes // 2) if cap_bytes else 0
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self.total = 0
        self.dropped = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self._head_left < 0:
            self._fh.write(chunk)
            return
        if self._head_left:
            head = chunk[:self._head_left]
            self._fh.write(head)
            self._head_left -= len(head)
            chunk = chunk[len(head):]
        if chunk:
            self._tail.append(chunk)
            self._tail_bytes += len(chunk)
            while self._tail_bytes - len(self._tail[0]) >= self._tail_cap:
                first = self._tail.popleft()
                self._tail_bytes -= len(first)
                self.dropped += len(first)

    def close(self) -> None:
        extra = self._tail_bytes - self._tail_cap
        if extra > 0:                       # the cut falls inside the first chunk kept
            self.dropped += extra
            self._tail[0] = self._tail[0][extra:]
        if self.dropped:
            self._fh.write(f"\n[gpuscope: {self.dropped} bytes of output dropped here; the saved output keeps "
                           f"the first and last {self._tail_cap / 2**20:.3g} MB ({CAP_ENV}, or "
                           f"gpuscope run --output-cap-mb, changes the cap)]\n".encode())
        for chunk in self._tail:
            self._fh.write(chunk)
        self._fh.close()


class OutputPump:
    """Reads one pipe or pty on a daemon thread until EOF (or until told to give up)."""

    def __init__(self, name: str, fd: int, log_path: str, listeners: list[OutputListener],
                 cap_bytes: int | None = None, close: Callable[[], None] | None = None):
        """``close``: what closes ``fd`` (its file object's ``close``, or ``os.close``), called once
        the pipe is read to its end, also when that comes after the run was reported."""
        self.name = name
        self._fd = fd
        self._close = close
        self._log = CappedLog(log_path, output_cap_bytes() if cap_bytes is None else (cap_bytes or None))
        self._listeners = listeners
        self.bytes = 0
        self._thread = threading.Thread(target=self._run, name=f"gpuscope-{name}", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Bytes left out of the saved log by the cap (known once the pump has ended)."""
        return self._log.dropped

    def _run(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._fd, READ_SIZE)
                except OSError:  # EIO: a pty whose last writer closed it
                    break
                if not chunk:
                    break
                self.bytes += len(chunk)
                self._log.write(chunk)
                for listener in self._listeners:
                    try:
                        listener(self.name, chunk)
                    except Exception:  # noqa: BLE001 - a broken listener must not stop the log
                        pass
        finally:
            self._log.close()
            if self._close is not None:
                self._close()

    def join(self, timeout: float) -> bool:
        """Wait for EOF; False if a process that outlived the run still holds the pipe open."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
