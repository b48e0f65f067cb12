"""The app's error sink: unexpected exceptions become one line in the window and a log entry.

``describe_exception`` writes the traceback to ``<data dir>/gpuscope-errors.log`` and returns a
line that names that file. ``install_hooks(show)`` routes ``sys.excepthook`` (exceptions in Qt
slots) and ``threading.excepthook`` there, so the user never sees a traceback and the app keeps
running. Qt-free.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Callable

from gpuscope import __version__
from gpuscope.errors import UserError


def log_path() -> str | None:
    try:
        from gpuscope import paths

        return str(paths.data_dir() / "gpuscope-errors.log")
    except OSError:
        return None


def describe_exception(exc: BaseException, what: str = "gpuscope") -> str:
    """Log the traceback; one line for the status bar or a dialog."""
    if isinstance(exc, UserError):
        return str(exc)
    path = log_path()
    where = ""
    if path is not None:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} gpuscope {__version__} app: {what}\n")
                traceback.print_exception(type(exc), exc, exc.__traceback__, file=fh)
            where = f" (details in {path})"
        except OSError:
            pass
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
