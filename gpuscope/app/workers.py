"""Blocking work off the GUI thread: a small task API on the app's QThreadPool.

``submit(fn, on_done=..., on_error=...)`` runs ``fn(task)`` on a pool thread; ``task.cancelled``
tells a long step to give up, ``task.progress(text)`` reports a line. Results and errors come
back on the GUI thread through :func:`gpuscope.app.bridge.to_gui`; ``task.partial(value)`` hands
an early result (a report's summaries before its timeline) to ``on_partial``. A cancelled task's
result is dropped, also one already on its way to the GUI thread when Cancel came. Errors never
surface as tracebacks: a :class:`~gpuscope.errors.UserError` gives its one line, anything else a
line that names the log file holding the traceback.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThreadPool

from gpuscope.app import bridge
from gpuscope.app.error_sink import describe_exception
from gpuscope.errors import UserError

_pool: QThreadPool | None = None
_active: set["Task"] = set()   # keeps Python references until each task has run
_active_lock = threading.Lock()


def pool() -> QThreadPool:
    """The app's own pool: a run's ``wait`` holds one thread for the whole run, so it has room."""
    global _pool
    if _pool is None:
        _pool = QThreadPool()
        _pool.setMaxThreadCount(max(4, QThreadPool.globalInstance().maxThreadCount()))
    return _pool


class Task(QRunnable):
    """One unit of work; see the module docstring."""

    def __init__(self, fn: Callable[["Task"], Any], on_done: Callable[[Any], None] | None,
                 on_error: Callable[[str], None] | None, label: str,
                 on_progress: Callable[[str], None] | None = None,
                 on_partial: Callable[[Any], None] | None = None) -> None:
        super().__init__()
        self.setAutoDelete(False)
        self.fn, self.on_done, self.on_error, self.label = fn, on_done, on_error, label
        self.on_progress, self.on_partial = on_progress, on_partial
        self._cancel = threading.Event()
        self.finished = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """Set when the task is cancelled: pass it to core calls that can stop early."""
        return self._cancel

    def cancel(self) -> None:
        self._cancel.set()

    def progress(self, text: str) -> None:
        self._finish(self.on_progress, text)

    def partial(self, value: Any) -> None:
        """Hand an early result to ``on_partial`` on the GUI thread (the task goes on)."""
        self._finish(self.on_partial, value)

    def run(self) -> None:
        try:
            result = self.fn(self)
        except UserError as exc:
            self._finish(self.on_error, str(exc))
        except Exception as exc:  # noqa: BLE001 - thread boundary: an error is a message, never a crash
            self._finish(self.on_error, describe_exception(exc, self.label))
        else:
            self._finish(self.on_done, result)
        finally:
            self.finished.set()
            with _active_lock:
                _active.discard(self)

    def _finish(self, callback: Callable[[Any], None] | None, value: Any) -> None:
        if callback is not None and not self.cancelled:
            bridge.to_gui(self._deliver, callback, value)

    def _deliver(self, callback: Callable[[Any], None], value: Any) -> None:
        """On the GUI thread: a Cancel that came after the value was sent, before it arrived, wins;
        so does the closing of the view it was for (its widget is gone)."""
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, QObject) and not shiboken6.isValid(owner):
            return
        if not self.cancelled:
            callback(value)


def submit(fn: Callable[[Task], Any], *, on_done: Callable[[Any], None] | None = None,
           on_error: Callable[[str], None] | None = None, label: str = "working",
           on_progress: Callable[[str], None] | None = None,
           on_partial: Callable[[Any], None] | None = None) -> Task:
    """Start ``fn(task)`` on the pool and return the task (for cancel)."""
    task = Task(fn, on_done, on_error, label, on_progress, on_partial)
    with _active_lock:
        _active.add(task)
    pool().start(task)
    return task


def wait_all(timeout_ms: int = 30_000) -> bool:
    """Wait for every task (closing the window, tests)."""
    return _pool is None or _pool.waitForDone(timeout_ms)
