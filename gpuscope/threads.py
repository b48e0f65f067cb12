"""Threads, locks and events for the run path, without importing ``threading``.

``import threading`` costs 7-10 ms on the 2-core runner (it imports ``functools``, ``collections``,
``types``, ``operator``, ``reprlib``, ... and ``functools`` compiles a named tuple), a sixth of the
50 ms that ``gpuscope run`` may add (issue 14.4). Every thread gpuscope's run path starts is a
daemon thread that the run joins itself, and it needs only ``start``, ``join`` and ``is_alive``,
locks and events. ``_thread``, the built-in module under ``threading``, has those.

* :class:`Thread` is ``threading.Thread`` whenever ``threading`` is already loaded (the app, the
  tests, a library): there, gpuscope's threads are ordinary threads, listed by
  ``threading.enumerate()``, named, and their uncaught exceptions go to ``threading.excepthook``.
  In ``gpuscope run``, where nothing loaded it, it is :class:`LeanThread`.
* :class:`Event` is the same object in both (``threading.Event``'s methods and answers).
* ``Lock`` and ``RLock`` are ``_thread``'s, the very types ``threading`` hands out.

``threading`` imported later by a thread started here takes that thread for the main one (before
Python 3.13). Python allows for it (``threading._shutdown`` skips a main thread that is not the
real one, bpo-1596321), and gpuscope never asks ``threading`` for the main thread on the run path.
"""

from __future__ import annotations

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Any, Callable, Union

    ThreadLike = Union["LeanThread", threading.Thread]   # what Thread() returns

Lock = _thread.allocate_lock
RLock = _thread.RLock
TIMEOUT_MAX = _thread.TIMEOUT_MAX


_live: set[LeanThread] = set()   # started and not yet ended


def running() -> bool:
    """Whether a :class:`LeanThread` is running (``threading``'s threads are not counted)."""
    return bool(_live)


def _timeout(timeout: float | None) -> float:
    """``lock.acquire``'s timeout for a ``timeout`` in seconds as ``threading`` takes it."""
    if timeout is None:
        return -1
    return min(max(timeout, 0.0), TIMEOUT_MAX)


class Event:
    """``threading.Event``: a flag that threads wait for. ``wait`` returns the flag."""

    __slots__ = ("_flag", "_mutex", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        self._mutex = _thread.RLock()   # re-entrant: a signal handler may set() what the thread waits for
        self._waiters: list[Any] = []

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._mutex:
            self._flag = True
            for waiter in self._waiters:
                waiter.release()
            self._waiters.clear()

    def clear(self) -> None:
        with self._mutex:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._mutex:
            if self._flag:
                return True
            waiter = _thread.allocate_lock()
            waiter.acquire()
            self._waiters.append(waiter)
        got = False
        try:
            got = waiter.acquire(True, _timeout(timeout))
        finally:
            if not got:   # timed out, or a signal handler raised: not released by set() meanwhile
                with self._mutex:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
        return self._flag

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Event: {'set' if self._flag else 'unset'}>"


class LeanThread:
    """A daemon thread on ``_thread``: ``threading.Thread``'s ``start``, ``join``, ``is_alive``,
    ``name``, ``ident`` and ``daemon``. An exception that ends it is printed as ``threading``
    prints it (``Exception in thread NAME:`` and the traceback, by ``_thread._excepthook``), or
    goes to ``threading.excepthook`` if ``threading`` was loaded meanwhile."""

    daemon = True

    def __init__(self, target: Callable[..., Any], args: tuple[Any, ...] = (), name: str | None = None,
                 kwargs: dict[str, Any] | None = None) -> None:
        self._target = target
        self._args = args
        self._kwargs = kwargs or {}
        self.name = name or f"Thread-{id(self):x}"
        self.ident: int | None = None
        self._done: Any = None   # a lock held while the target runs

    def start(self) -> None:
        if self._done is not None:
            raise RuntimeError("threads can only be started once")
        self._done = _thread.allocate_lock()
        self._done.acquire()
        _live.add(self)
        try:
            self.ident = _thread.start_new_thread(self._bootstrap, ())
        except BaseException:
            _live.discard(self)
            self._done.release()
            raise

    def _bootstrap(self) -> None:
        try:
            self._target(*self._args, **self._kwargs)
        except SystemExit:
            pass
        except BaseException:
            _report(self)
        finally:
            self._target = self._args = self._kwargs = None   # as threading: no reference cycles kept
            _live.discard(self)
            self._done.release()

    def is_alive(self) -> bool:
        return self._done is not None and self._done.locked()

    def join(self, timeout: float | None = None) -> None:
        if self._done is None:
            raise RuntimeError("cannot join thread before it is started")
        if self.ident == _thread.get_ident():
            raise RuntimeError("cannot join current thread")
        if self._done.acquire(True, _timeout(timeout)):
            self._done.release()

    def __repr__(self) -> str:
        state = "started" if self.is_alive() else ("stopped" if self._done is not None else "initial")
        return f"<LeanThread({self.name}, {state} daemon {self.ident})>"


def _report(thread: LeanThread) -> None:
    """An uncaught exception of ``thread``, reported as ``threading`` would."""
    exc_type, exc, tb = sys.exc_info()
    args = _thread._ExceptHookArgs((exc_type, exc, tb, thread))
    hook = getattr(_threading(), "excepthook", None) or _thread._excepthook
    try:
        hook(args)
    except BaseException:   # as threading: a failing hook is reported by sys.excepthook
        sys.excepthook(*sys.exc_info())
    finally:
        del exc, tb, args


def _threading() -> Any:
    """``threading`` if it is loaded, and not still being imported by another thread (a module
    half-run has only some of its names), else None."""
    threading = sys.modules.get("threading")
    if threading is None or getattr(getattr(threading, "__spec__", None), "_initializing", False):
        return None
    return threading


def Thread(target: Callable[..., Any], args: tuple[Any, ...] = (), name: str | None = None,
           daemon: bool = True, kwargs: dict[str, Any] | None = None) -> Any:
    """A daemon thread: ``threading.Thread`` if ``threading`` is loaded, else a :class:`LeanThread`."""
    if not daemon:
        raise ValueError("gpuscope's threads are daemon threads: the run joins what it waits for")
    threading = _threading()
    if threading is not None:
        return threading.Thread(target=target, args=args, kwargs=kwargs, name=name, daemon=True)
    return LeanThread(target, args, name, kwargs)
