"""What an op gets: one request being answered on the agent (:class:`Call`), and the agent's hello."""

from __future__ import annotations

import getpass
import os
import platform
import socket
import threading
from collections.abc import Callable
from typing import Any

from gpuscope import __version__
from gpuscope.remote import protocol

__all__ = ["Call", "hello"]


class Call:
    """One request being answered: its args, ``emit(kind, data)`` for events, and ``cancelled``
    (set by a cancel or when the connection ends; ``disconnected`` tells which)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], disconnected: threading.Event,
                 req_id: int, op: str, args: dict[str, Any]) -> None:
        self._send, self._disconnected = send, disconnected
        self.id, self.op, self.args = req_id, op, args
        self.cancelled = threading.Event()

    @property
    def disconnected(self) -> bool:
        return self._disconnected.is_set()

    def emit(self, kind: str, data: Any = None) -> None:
        self._send(protocol.event(self.id, kind, data))

    def wait_cancel(self, timeout: float) -> bool:
        return self.cancelled.wait(timeout)


def hello() -> dict[str, Any]:
    """The agent's first line: who and what answers (docs/REMOTE.md)."""
    from gpuscope import paths

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"hello": protocol.HELLO, "protocol": protocol.PROTOCOL, "version": __version__,
            "python": platform.python_version(), "host": socket.gethostname(), "user": user,
            "uid": os.getuid(), "data_dir": str(paths.data_dir()), "pid": os.getpid()}
