"""What a spawn child's (or the forkserver's) re-import of ``__main__`` costs, and what it imports.

``multiprocessing.spawn._fixup_main_from_path`` / ``_fixup_main_from_name`` run the script (or the
``-m`` module) again as ``__mp_main__`` before the child gets its task. While one of them runs,
the builtin ``__import__`` is wrapped: each import of a module not loaded yet that the main
module's own code makes is timed, with what that module imports in turn. Once it returns, the
wrapper is gone and one ``U`` line (docs/EVENTS.md) holds the time and the slowest modules.
Nothing is wrapped in any other process or at any other moment.
"""

import builtins
import os
import sys

from .disguise import disguise
from .eventlog import STATE, now
from .frames import hide_frames

TOP = 8          # modules named in the log, the slowest first
PRELOAD_ENV = "GPUSCOPE_FORKSERVER_PRELOAD"     # modules, comma-separated (SetForkserverPreload's fix)
_MAIN = ("__mp_main__", "__main__")


class _ImportTimer:
    """Times the main module's imports while it is re-imported."""

    __slots__ = ("original", "times", "count")

    def __init__(self):
        self.original = builtins.__import__
        self.times = {}
        self.count = 0

    def __call__(self, name, globals=None, locals=None, fromlist=(), level=0):
        if level or name in sys.modules or globals is None or globals.get("__name__") not in _MAIN:
            return self.original(name, globals, locals, fromlist, level)
        t0 = now()
        try:
            return self.original(name, globals, locals, fromlist, level)
        finally:
            self.times[name] = self.times.get(name, 0) + now() - t0
            self.count += 1

    def install(self):
        builtins.__import__ = self

    def remove(self):
        if builtins.__import__ is self:
            builtins.__import__ = self.original

    def slowest(self):
        return sorted(self.times.items(), key=lambda kv: -kv[1])[:TOP]


def _record(t0, t1, timer, how, main):
    try:
        modules = timer.slowest()
        shown = sum(ns for _, ns in modules)
        STATE.main_reimport(t0, t1, {"how": how, "main": str(main), "imports": timer.count,
                                     "modules": [[n, ns] for n, ns in modules],
                                     "other_ns": sum(timer.times.values()) - shown})
    except Exception as exc:
        STATE.error("__main__ re-import record", exc)


def _timed(original, how):
    def fixup(*args, **kwargs):
        timer = None
        try:
            timer = _ImportTimer()
            timer.install()
        except Exception as exc:
            STATE.error("__main__ re-import timer", exc)
        before = sys.modules.get("__main__")
        t0 = now()
        try:
            return original(*args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise
        finally:
            if timer is not None:
                timer.remove()
                if sys.modules.get("__main__") is not before:   # not a fork of a server that had it already
                    _record(t0, now(), timer, how, args[0] if args else "")
    return fixup


def patch(spawn_module):
    """Wrap the two functions that re-import ``__main__`` (once; over --annotate's own wrapper)."""
    try:
        for name, how in (("_fixup_main_from_path", "path"), ("_fixup_main_from_name", "name")):
            original = getattr(spawn_module, name, None)
            if original is None or getattr(original, "_gpuscope_reimport", False):
                continue
            setattr(spawn_module, name, disguise(_timed(original, how), original, _gpuscope_reimport=True))
    except Exception as exc:
        STATE.error("patching multiprocessing.spawn for the re-import timer", exc)


def preload(forkserver_module):
    """The modules of ``GPUSCOPE_FORKSERVER_PRELOAD`` added to the forkserver's preload list (as
    ``multiprocessing.set_forkserver_preload`` does) before its server starts: it imports them once
    and its children start with them. The program's own call of it later still wins."""
    try:
        names = [n.strip() for n in os.environ.get(PRELOAD_ENV, "").split(",") if n.strip()]
        server = getattr(forkserver_module, "_forkserver", None)
        if names and server is not None:
            have = list(getattr(server, "_preload_modules", None) or ["__main__"])
            server.set_forkserver_preload(have + [n for n in names if n not in have])
    except Exception as exc:
        STATE.error("forkserver preload", exc)
