"""Shared memory a process creates and unlinks (the ``D`` lines of the event log).

Loaded lazily, when the program imports ``multiprocessing.shared_memory`` (``SharedMemory``) or
``multiprocessing.synchronize`` (named ``SemLock``\\ s of spawn/forkserver). Each creation is
written with its ``/dev/shm`` name, size and the user's ``file:line`` that made it; each unlink
with its name. At the run's end the segments still in ``/dev/shm`` are named as ``leaked-shm``
(gpuscope/findings/shm_rules.py), and ``gpuscope cleanup`` tells which run made a leftover.

The wrappers return what the originals return and let their exceptions through unchanged; a
failure of the bookkeeping is swallowed. Standard library only.
"""

import os
import sys

from .disguise import disguise
from .frames import hide_frames

_MP_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep + "multiprocessing" + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _where():
    """``file:line`` of the first frame outside multiprocessing and gpuscope (the user's call)."""
    try:
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith(_MP_DIR) and not name.startswith(_HERE):
                return "%s:%d" % (name, frame.f_lineno)
            frame = frame.f_back
    except Exception:
        pass
    return ""


def _write(info):
    try:
        from .eventlog import STATE

        STATE.shm(info)
    except Exception:
        pass


def _then(original, note):
    """``original`` as it is (its exceptions go through with gpuscope's frames hidden), then
    ``note(result, *args, **kwargs)``, whose failures are swallowed."""

    def wrapper(*args, **kwargs):
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise
        try:
            note(result, *args, **kwargs)
        except Exception:
            pass
        return result

    return disguise(wrapper, original, __gpuscope__=True)


def _shm_made(_result, self, *args, **kwargs):
    if kwargs.get("create", args[1] if len(args) > 1 else False):   # SharedMemory(name, create, size)
        _write({"op": "create", "kind": "shm", "name": self.name, "size": self.size, "where": _where()})


def _shm_unlinked(_result, self):
    _write({"op": "unlink", "kind": "shm", "name": self.name, "where": _where()})


def _sem_made(_result, self, *args, **kwargs):
    name = getattr(self._semlock, "name", None)
    if name:   # None: unlinked at once (fork context): nothing can leak
        _write({"op": "create", "kind": "sem", "name": "sem." + name.lstrip("/"), "where": _where()})


def _sem_unlinked(_result, name):
    _write({"op": "unlink", "kind": "sem", "name": "sem." + str(name).lstrip("/")})


def patch_shared_memory(module):
    """Wrap ``SharedMemory.__init__`` (creations) and ``SharedMemory.unlink`` once."""
    cls = getattr(module, "SharedMemory", None)
    init = getattr(cls, "__init__", None)
    unlink = getattr(cls, "unlink", None)
    if init is None or unlink is None or getattr(init, "__gpuscope__", False):
        return
    cls.__init__ = _then(init, _shm_made)
    cls.unlink = _then(unlink, _shm_unlinked)


def patch_semlock(module):
    """Wrap ``SemLock.__init__`` (a named semaphore made) and ``SemLock._cleanup`` (unlinked) once."""
    cls = getattr(module, "SemLock", None)
    init = getattr(cls, "__init__", None)
    cleanup = cls.__dict__.get("_cleanup") if cls is not None else None
    func = getattr(cleanup, "__func__", None)
    if init is None or func is None or getattr(init, "__gpuscope__", False):
        return
    cls.__init__ = _then(init, _sem_made)
    cls._cleanup = staticmethod(_then(func, _sem_unlinked))
