"""What the findings rules need from inside a process: threads alive at fork, children's exit statuses.

- ``fork_threads`` (an ``I`` line of the forking process): at every ``os.fork`` made while other
  threads run (the deadlock hazard CPython 3.12+ only warns about, hidden by default filters),
  the names of those threads, the forking thread, and how many such forks so far.
- ``child_exits`` (an ``I`` line of the parent): multiprocessing children that ended with a
  non-zero status, ``{pid: exitcode}`` (negative: killed by that signal), read where
  multiprocessing itself reaps them (``Popen.poll``), so nothing extra is waited for.

Standard library only; never raises into the program; changes no result of the calls it wraps.
"""

import os
import sys
import time

from .disguise import disguise

_SEEN = {"forks": 0, "exits": {}}
_MAX_EXITS = 256


def _state():
    from .eventlog import STATE

    return STATE


def _before_fork():
    try:
        threading = sys.modules.get("threading")
        if threading is None:  # never imported: no thread it could list (and none imported for it)
            return
        current = threading.current_thread()
        others = [t for t in threading.enumerate() if t is not current and t.is_alive()]
        if not others:
            return
        _SEEN["forks"] += 1
        _state().update(fork_threads={
            "t_wall_ns": time.time_ns(),
            "forking_thread": current.name,
            "threads": [{"name": t.name, "daemon": bool(t.daemon), "target": _target(t)} for t in others][:32],
            "forks": _SEEN["forks"],
        })
    except Exception:
        pass


def _target(thread):
    fn = getattr(thread, "_target", None)
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) if fn is not None else None


def _record_exit(popen):
    code = getattr(popen, "returncode", None)
    pid = getattr(popen, "pid", None)
    if not code or pid is None or pid in _SEEN["exits"] or len(_SEEN["exits"]) >= _MAX_EXITS:
        return
    _SEEN["exits"][pid] = int(code)
    _state().update(child_exits={str(p): c for p, c in _SEEN["exits"].items()})


def _wrap_poll(cls):
    original = cls.__dict__.get("poll")
    if original is None or getattr(original, "__gpuscope__", False):
        return

    def poll(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if result:
            try:
                _record_exit(self)
            except Exception:
                pass
        return result

    cls.poll = disguise(poll, original, __gpuscope__=True)


def _patch_popen(module):
    try:
        _wrap_poll(module.Popen)
    except Exception:
        pass


def _after_fork_in_child():
    _SEEN["forks"] = 0
    _SEEN["exits"] = {}


def install(when_imported):
    """Watch forks and multiprocessing children of this process."""
    try:
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
        when_imported("multiprocessing.popen_fork", _patch_popen)
        when_imported("multiprocessing.popen_forkserver", _patch_popen)
        return True
    except Exception:
        return False
