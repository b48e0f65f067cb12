"""Pump a child's stdout/stderr: to a log file in the run folder and to listeners, byte for byte."""

from __future__ import annotations

import os
import threading
from typing import Callable

OutputListener = Callable[[str, bytes], None]  # (stream name "stdout"/"stderr", chunk)


class OutputPump:
    """Reads one pipe on a daemon thread until EOF (or until told to give up)."""

    def __init__(self, name: str, fd: int, log_path: str, listeners: list[OutputListener]):
        self.name = name
        self._fd = fd
        self._log = open(log_path, "wb")
        self._listeners = listeners
        self.bytes = 0
        self._thread = threading.Thread(target=self._run, name=f"gpuscope-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                self.bytes += len(chunk)
                self._log.write(chunk)
                self._log.flush()
                for listener in list(self._listeners):
                    try:
                        listener(self.name, chunk)
                    except Exception:  # noqa: BLE001 - a broken listener must not stop the log
                        pass
        finally:
            self._log.close()

    def join(self, timeout: float) -> bool:
        """Wait for EOF; False if a process that outlived the run still holds the pipe open."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
