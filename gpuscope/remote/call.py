"""What an op gets: one request being answered on the agent (:class:`Call`), and the agent's hello."""

from __future__ import annotations

import getpass
import os
import platform
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from gpuscope import __version__
from gpuscope.errors import UserError, log_internal_error
from gpuscope.remote import protocol

USER_PYTHON_ENV = "GPUSCOPE_USER_PYTHON"

__all__ = ["USER_PYTHON_ENV", "Call", "LoggedFailureError", "hello", "internal_line", "user_python"]


class LoggedFailureError(Exception):
    """An unexpected failure already written to the error log: its one line goes on as it is."""


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

    def arg(self, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        """One argument, type-checked (a missing or wrong one is a UserError)."""
        value = self.args.get(name, default)
        if value is ...:
            raise UserError(f"{self.op}: missing argument {name!r}")
        if value is not None and not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise UserError(f"{self.op}: argument {name!r} has the wrong type ({type(value).__name__})")
        return value


def hello() -> dict[str, Any]:
    """The agent's first line: who and what answers (docs/REMOTE.md)."""
    from gpuscope import paths

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"hello": protocol.HELLO, "protocol": protocol.PROTOCOL, "version": __version__,
            "python": platform.python_version(), "host": socket.gethostname(), "user": user,
            "uid": os.getuid(), "data_dir": str(paths.data_dir()), "pid": os.getpid(),
            "python_path": user_python(), "gpu_reason": _gpu_reason()}


def user_python() -> str:
    """The interpreter a run uses when it names none: the remote's own python3, which the
    bootstrap found on the login PATH (``GPUSCOPE_USER_PYTHON``), not the agent's private one."""
    named = os.environ.get(USER_PYTHON_ENV, "")
    return named if named and os.access(named, os.X_OK) else sys.executable


def _gpu_reason() -> str | None:
    """None when NVML sees a GPU here, else why not."""
    try:
        from gpuscope import api

        return api.gpu_unavailable_reason()
    except Exception as exc:  # noqa: BLE001 - the hello must come; the reason says what failed
        return f"NVML could not be read: {exc}"


def internal_line(exc: BaseException, op: str) -> str:
    """One line for an unexpected failure; its traceback goes to gpuscope's error log."""
    where = log_internal_error(exc, f"agent op={op}")
    return f"internal error in {op}: {type(exc).__name__}: {exc}{where}"
