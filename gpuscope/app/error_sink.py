"""The app's error sink: unexpected exceptions become one line in the window and a log entry.

``describe_exception`` writes the traceback to ``<data dir>/gpuscope-errors.log`` and returns a
line that names that file. ``install_hooks(show)`` routes ``sys.excepthook`` (exceptions in Qt
slots) and ``threading.excepthook`` there, so the user never sees a traceback and the app keeps
running. Qt-free.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

from gpuscope.errors import UserError, log_internal_error


def describe_exception(exc: BaseException, what: str = "gpuscope") -> str:
    """Log the traceback; one line for the status bar or a dialog."""
    if isinstance(exc, UserError):
        return str(exc)
    where = log_internal_error(exc, f"app: {what}")
    return f"{what}: internal error: {type(exc).__name__}: {exc}{where}"


def install_hooks(show: Callable[[str], None]) -> None:
    """Send uncaught exceptions (GUI thread and plain threads) to ``show(line)``."""

    def hook(etype, value, tb) -> None:
        if issubclass(etype, KeyboardInterrupt):
            sys.__excepthook__(etype, value, tb)
            return
        show(describe_exception(value.with_traceback(tb), "gpuscope"))

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            show(describe_exception(args.exc_value, f"thread {getattr(args.thread, 'name', '?')}"))

    sys.excepthook = hook
    threading.excepthook = thread_hook
