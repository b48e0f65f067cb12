"""The one place where work on other threads reaches the GUI thread.

* ``to_gui(fn, *args)`` posts a call to the GUI thread through a queued ``Signal(object)``;
  workers (:mod:`gpuscope.app.workers`) deliver their results this way.
* :class:`RunBridge` is a run's :class:`~gpuscope.views.run_stream.RunStream` (bounded buffers
  the core fills on its threads); the GUI's refresh timer drains it about ten times a second.

No widget is ever touched from another thread; nothing else in the app crosses threads.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal

from gpuscope.views.run_stream import RunStream


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


class RunBridge(QObject, RunStream):
    """A run's stream (:class:`gpuscope.views.run_stream.RunStream`, drained by the GUI's timer);
    progress lines arrive as a signal, queued to the GUI thread."""

    sigProgress = Signal(object)   # str, queued to the GUI thread

    def __init__(self) -> None:
        QObject.__init__(self)
        RunStream.__init__(self)

    def on_progress(self, message: str) -> None:
        self.sigProgress.emit(message)
