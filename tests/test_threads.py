"""gpuscope/threads.py: the run path's threads and events without ``threading`` (issue 14.4)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from gpuscope import threads
from tests.fresh_python import bare_env, fresh_json


def test_a_lean_thread_runs_its_target_and_joins():
    out: list[object] = []
    gate = threads.Event()
    t = threads.LeanThread(lambda a, b=0: (gate.wait(5), out.append(a + b)), (1,), name="gpuscope-x", kwargs={"b": 2})
    assert not t.is_alive() and t.daemon and t.name == "gpuscope-x"
    with pytest.raises(RuntimeError):
        t.join()                                  # not started
    t.start()
    assert t.is_alive() and threads.running() and isinstance(t.ident, int)
    t.join(0.05)                                  # a timeout returns with the thread still running
    assert t.is_alive() and out == []
    gate.set()
    t.join()
    assert not t.is_alive() and out == [3] and not threads.running()
    with pytest.raises(RuntimeError):
        t.start()                                 # once only, as threading


def test_a_thread_cannot_join_itself():
    seen: list[str] = []
    holder: list[threads.LeanThread] = []

    def body() -> None:
        try:
            holder[0].join()
        except RuntimeError as exc:
            seen.append(str(exc))

    holder.append(threads.LeanThread(body))
    holder[0].start()
    holder[0].join(5)
    assert seen == ["cannot join current thread"]


def test_thread_is_threadings_own_once_threading_is_loaded():
    """Here (pytest loaded threading) gpuscope's threads are ordinary, named, enumerated threads."""
    t = threads.Thread(target=time.sleep, args=(0.2,), name="gpuscope-test", daemon=True)
    assert isinstance(t, threading.Thread)
    t.start()
    assert "gpuscope-test" in [x.name for x in threading.enumerate()] and t.daemon
    t.join()
    with pytest.raises(ValueError):
        threads.Thread(target=print, daemon=False)


def test_an_event_answers_as_threadings():
    for make in (threads.Event, threading.Event):
        e = make()
        assert not e.is_set() and e.wait(0) is False and e.wait(0.01) is False and e.wait(-1) is False
        started = time.monotonic()
        setter = threading.Timer(0.1, e.set)
        setter.start()
        assert e.wait(5) is True and time.monotonic() - started < 4
        assert e.is_set() and e.wait() is True
        e.clear()
        assert not e.is_set() and e.wait(0.01) is False
        setter.join()


def test_an_event_wakes_every_waiter():
    e = threads.Event()
    woke: list[bool] = []
    waiters = [threads.LeanThread(lambda: woke.append(e.wait(10))) for _ in range(5)]
    for w in waiters:
        w.start()
    time.sleep(0.1)
    e.set()
    for w in waiters:
        w.join(10)
    assert woke == [True] * 5 and not e._waiters


def test_a_timed_out_waiter_leaves_nothing_behind():
    e = threads.Event()
    assert e.wait(0.01) is False and e._waiters == []


def test_a_lean_threads_exception_is_printed_as_threading_prints_it():
    """Without threading loaded, the traceback goes to stderr under threading's own heading; the
    thread still counts as ended."""
    code = ("import sys\n"
            "from gpuscope import threads\n"
            "t = threads.Thread(target=lambda: 1 / 0, name='gpuscope-boom')\n"
            "t.start(); t.join()\n"
            "print(type(t).__name__, t.is_alive(), threads.running(), 'threading' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                         env=bare_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["LeanThread", "False", "False", "False"]
    assert "Exception in thread gpuscope-boom:" in out.stderr and "ZeroDivisionError" in out.stderr, out.stderr


def test_a_lean_threads_exception_goes_to_threadings_hook_once_loaded(monkeypatch):
    caught: list[tuple[str, str]] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: caught.append((a.thread.name, a.exc_type.__name__)))
    t = threads.LeanThread(lambda: [][1], name="gpuscope-hook")
    t.start()
    t.join(5)
    assert caught == [("gpuscope-hook", "IndexError")]


def test_gpuscopes_threads_in_a_fresh_interpreter_load_no_threading():
    code = ("import sys, json\n"
            "from gpuscope import threads\n"
            "e = threads.Event(); t = threads.Thread(target=e.set, name='n'); t.start(); t.join()\n"
            "print(json.dumps([type(t).__name__, e.is_set(), 'threading' in sys.modules]))\n")
    assert fresh_json(code, bare=True) == ["LeanThread", True, False]


def test_threading_still_being_imported_by_another_thread_is_not_used():
    """Another thread halfway through ``import threading`` (its module has only some names yet):
    a thread started meanwhile is a LeanThread, not an AttributeError (seen with a Ray run, whose
    probe imports subprocess while the run starts its threads)."""
    code = ("import sys, json, types\n"
            "half = types.ModuleType('threading')\n"
            "half.__spec__ = sys.modules['_frozen_importlib'].ModuleSpec('threading', None)\n"
            "half.__spec__._initializing = True\n"
            "sys.modules['threading'] = half\n"
            "from gpuscope import threads\n"
            "ran = []\n"
            "t = threads.Thread(target=ran.append, args=(1,), name='x'); t.start(); t.join()\n"
            "del sys.modules['threading']\n"
            "print(json.dumps([type(t).__name__, ran]))\n")
    assert fresh_json(code, bare=True) == ["LeanThread", [1]]
