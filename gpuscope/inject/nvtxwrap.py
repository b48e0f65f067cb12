"""Record every NVTX range and mark the program makes through the ``nvtx`` package.

The wrappers replace ``nvtx.annotate``, ``push_range``/``pop_range``, ``start_range``/``end_range``
and ``mark`` (in ``nvtx`` and ``nvtx.nvtx``). Each calls the original, so a profiler attached to
the process sees the same calls, and records the range in the event log whether or not a profiler
is attached.

Fork children: string handles and domains registered before a fork are invalid in the child, and
nsys discards events that use them (docs/RUN-ENGINE.md). So an ``annotate`` object remembers the pid it
registered in and registers again (a fresh original ``annotate``) the first time it is used in a
new process, and ``get_domain``'s cache is cleared in every fork child.
"""

import functools
import os
import sys

from .eventlog import STATE, native_tid, now, safe
from .frames import hide_frames

_orig: dict = {}


class _Registered:
    """An original ``nvtx.annotate`` valid in the current process (re-created after a fork).

    ``push(attrs, handle)`` / ``pop(handle)`` are nvtx's own C entry points when the installed
    nvtx exposes them (the fast path the original decorator takes), else the original object's
    ``__enter__``/``__exit__``.
    """

    __slots__ = ("args", "pid", "enter", "exit", "nid", "domain", "push", "pop", "attrs", "handle")

    def __init__(self, args, eager=True):
        self.args = args
        self.domain = args[2] or ""
        self.nid = -1
        self.pid = 0
        self.enter = self.exit = self.push = self.pop = None
        self.attrs = self.handle = None
        if eager:
            self._make()  # errors in the user's arguments surface as they would without gpuscope

    def _make(self):
        # Name ids belong to one process's log: declare the name again in each new process.
        try:
            self.nid = STATE.name_id("nvtx", self.domain, self.args[0] or "", self.args[1])
        except Exception as exc:
            STATE.error("nvtx name", exc)
        inner = _orig["annotate"](*self.args)
        self.enter = inner.__enter__
        self.exit = inner.__exit__
        self.push, self.pop, self.attrs, self.handle = _fast_path(inner)
        self.pid = STATE.pid

    def resolve(self):
        try:
            self._make()
        except Exception as exc:  # keep recording even if nvtx cannot register here
            STATE.error("nvtx re-registration", exc)
            self.enter = _noop
            self.exit = _noop3
            self.push, self.pop, self.attrs, self.handle = _push_noop, _pop_noop, None, None
            self.pid = STATE.pid


def _fast_path(inner):
    nv = sys.modules.get("nvtx.nvtx")
    push = getattr(nv, "libnvtx_push_range", None)
    pop = getattr(nv, "libnvtx_pop_range", None)
    attrs = getattr(inner, "attributes", None)
    domain = getattr(inner, "domain", None)
    handle = getattr(domain, "handle", None)
    dummy = getattr(nv, "dummy_domain", None)
    if push is not None and pop is not None and attrs is not None and domain is not None and domain is not dummy:
        return push, pop, attrs, handle
    enter, exit_ = inner.__enter__, inner.__exit__
    return (lambda _a, _h: enter()), (lambda _h: exit_(None, None, None)), None, None


def _push_noop(_attrs, _handle):
    return None


def _pop_noop(_handle):
    return None


def _noop():
    return None


def _noop3(*_):
    return False


class annotate:  # noqa: N801 - named as nvtx.annotate, which it stands in for
    """Drop-in for ``nvtx.annotate`` (context manager and decorator) that also records."""

    __slots__ = ("_args", "_reg", "__weakref__")

    def __init__(self, message=None, color=None, domain=None, category=None, payload=None):
        self._args = (message, color, domain, category, payload)
        self._reg = _Registered(self._args) if message else None

    def __reduce__(self):
        return (self.__class__, self._args)

    def __enter__(self):
        reg = self._reg
        if reg is None or reg.pid != STATE.pid:
            reg = self._registered()
        reg.push(reg.attrs, reg.handle)
        stack = STATE.stacks.setdefault((native_tid(), reg.domain), [])
        stack.append((reg.nid, now()))
        return self

    def _registered(self):
        reg = self._reg
        if reg is None:
            reg = self._reg = _Registered(self._args)
        if reg.pid != STATE.pid:
            reg.resolve()
        return reg

    def __exit__(self, exc_type, exc, tb):
        t1 = now()
        reg = self._reg
        reg.pop(reg.handle)
        stack = STATE.stacks.get((native_tid(), reg.domain))
        if stack:
            nid, t0 = stack.pop()
            STATE.add_range(t0, t1, nid)
        if exc is not None:
            hide_frames(exc)
        return False

    def __call__(self, func):
        """The decorated function holds only ``rec`` and ``func`` and calls ``rec.__enter__()`` and
        ``rec.__exit__(...)`` around ``func``, as nvtx's own decorator holds its annotate object.
        Pickled by value (cloudpickle: Ray, joblib/loky) it refers to nothing of gpuscope: ``rec``
        pickles as ``nvtx.nvtx.annotate(message, ...)``, which a process without gpuscope rebuilds
        as nvtx's own annotate (the same NVTX range; its ``__exit__`` takes any arguments) and an
        injected process as this class (recorded). ``__enter__`` returns the start time and
        ``__exit__`` gets it back as its first argument: no per-thread state."""
        message = self._args[0] or getattr(func, "__name__", None) or ""
        rec = _Decorated((message,) + self._args[1:])

        @functools.wraps(func)
        def inner(*args, **kwargs):
            t0 = rec.__enter__()
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:
                rec.__exit__(t0, exc, None)
                raise
            rec.__exit__(t0, None, None)
            return result

        return inner


class _Decorated(_Registered):
    """The range of an ``@annotate``-decorated function (see ``annotate.__call__``), pickled as
    the ``annotate`` it stands for."""

    __slots__ = ()

    def __reduce__(self):
        return (annotate, self.args)

    def __enter__(self):
        if self.pid != STATE.pid:
            self.resolve()
        self.push(self.attrs, self.handle)
        return now()

    def __exit__(self, t0, exc, _tb):
        t1 = now()
        self.pop(self.handle)
        state = STATE
        state.buf.append((t0, t1, native_tid(), self.nid, "P"))
        if exc is not None:
            hide_frames(exc)   # the decorated function's own frame (this file) leaves the traceback
        if t1 > state.next_flush:
            state.flush()
        return False


def push_range(message=None, color="blue", domain=None, category=None, payload=None):
    _orig["push_range"](message, color, domain, category, payload)
    _record_push(message, color, domain)


@safe("nvtx.push_range")
def _record_push(message, color, domain):
    nid = STATE.name_id("nvtx", domain or "", message or "", color)
    STATE.stacks.setdefault((native_tid(), domain or ""), []).append((nid, now()))


def pop_range(domain=None):
    t1 = now()
    result = _orig["pop_range"](domain)
    stack = STATE.stacks.get((native_tid(), domain or ""))
    if stack:
        nid, t0 = stack.pop()
        STATE.add_range(t0, t1, nid)
    return result


def start_range(message=None, color=None, domain=None, category=None, payload=None):
    rid = _orig["start_range"](message, color, domain, category, payload)
    _record_start(rid, message, color, domain)
    return rid


@safe("nvtx.start_range")
def _record_start(rid, message, color, domain):
    nid = STATE.name_id("nvtx", domain or "", message or "", color)
    STATE.open_se[_key(rid)] = (nid, now(), native_tid())


def end_range(range_id):
    t1 = now()
    result = _orig["end_range"](range_id)
    try:
        opened = STATE.open_se.pop(_key(range_id), None)
        if opened is not None:
            nid, t0, tid = opened
            STATE.buf.append((t0, t1, tid, nid, "S"))
            if t1 > STATE.next_flush:
                STATE.flush()
    except Exception as exc:
        STATE.error("nvtx.end_range", exc)
    return result


def mark(message=None, color="blue", domain=None, category=None, payload=None):
    result = _orig["mark"](message, color, domain, category, payload)
    try:
        STATE.mark(STATE.name_id("nvtx", domain or "", message or "", color))
    except Exception as exc:
        STATE.error("nvtx.mark", exc)
    return result


def _key(rid):
    try:
        hash(rid)
        return rid
    except TypeError:
        return id(rid)


_WRAPPERS = {
    "annotate": annotate, "push_range": push_range, "pop_range": pop_range,
    "start_range": start_range, "end_range": end_range, "mark": mark,
}


@safe("wrapping nvtx")
def install(nvtx_pkg):
    """Called right after the user's program imports ``nvtx``."""
    inner = __import__("nvtx.nvtx", fromlist=["annotate"])
    if _orig:
        return
    for name, wrapper in _WRAPPERS.items():
        original = getattr(inner, name, None)
        if original is None:
            continue
        _orig[name] = original
        wrapper.__module__ = "nvtx.nvtx"
        wrapper.__qualname__ = name
        wrapper.__doc__ = getattr(original, "__doc__", None)
        for module in (inner, nvtx_pkg):
            if getattr(module, name, None) is original:
                setattr(module, name, wrapper)
    STATE.update(nvtx=getattr(nvtx_pkg, "__version__", None) or _dist_version(nvtx_pkg))


def _dist_version(nvtx_pkg):
    """The version in the name of the ``nvtx-<version>.dist-info`` folder beside the package, which
    is what ``importlib.metadata.version("nvtx")`` reads; that import (email, zipfile, pathlib,
    csv: costly in every process) only when the folder is elsewhere (an unusual install)."""
    try:
        site = os.path.dirname(os.path.dirname(nvtx_pkg.__file__))
        for name in os.listdir(site):
            if name.startswith("nvtx-") and name.endswith(".dist-info"):
                return name[len("nvtx-"):-len(".dist-info")]
    except Exception:
        pass
    try:
        from importlib.metadata import version

        return version("nvtx")
    except Exception:
        return "unknown"


def after_fork_in_child():
    """Domains and registered strings from the parent are invalid here: forget them."""
    inner = __import__("sys").modules.get("nvtx.nvtx")
    get_domain = getattr(inner, "get_domain", None)
    cache_clear = getattr(get_domain, "cache_clear", None)
    if cache_clear is not None:
        cache_clear()


def nvtx_available():
    return "nvtx.nvtx" in __import__("sys").modules and bool(_orig)



# -- ranges gpuscope adds (pool tasks, --annotate): NVTX domain "gpuscope" when nvtx is installed --
_injected = {"checked": False, "push": None, "pop": None}
INJECTED_DOMAIN = "gpuscope"


def _tool_attached():
    """Whether an NVTX tool receives this process's NVTX calls: NVTX's first call loads the library
    ``NVTX_INJECTION64_PATH`` names (nsys and Nsight Compute set it for the processes they profile),
    and without one every call is a no-op."""
    return bool(os.environ.get("NVTX_INJECTION64_PATH"))


def _load_injected():
    """nvtx's own push/pop for the ranges gpuscope adds: the program's, when it imported nvtx;
    otherwise gpuscope imports nvtx only for a tool that receives the ranges (its import is costly:
    every pool worker would pay it for ranges nobody reads; gpuscope's event log has them anyway)."""
    _injected["checked"] = True
    try:
        if "nvtx.nvtx" not in sys.modules and not _tool_attached():
            return
        import importlib.util

        if importlib.util.find_spec("nvtx") is None:
            return
        import nvtx  # noqa: F401 - our post-import hook wraps it; we call the originals below

        if _orig:
            _injected["push"] = _orig["push_range"]
            _injected["pop"] = _orig["pop_range"]
    except Exception as exc:
        STATE.error("loading nvtx for injected ranges", exc)


def injected_push(name):
    """Open an NVTX range for a range gpuscope adds; False when nvtx is unavailable."""
    if not _injected["checked"]:
        _load_injected()
    push = _injected["push"]
    if push is None:
        return False
    try:
        push(name, None, INJECTED_DOMAIN, None, None)
        return True
    except Exception as exc:
        STATE.error("injected NVTX range", exc)
        _injected["push"] = None
        return False


def injected_pop():
    try:
        _injected["pop"](INJECTED_DOMAIN)
    except Exception as exc:
        STATE.error("injected NVTX range", exc)


def call_in_range(kind, name, func, args, kwargs, flush=False):
    """Run ``func`` inside a range gpuscope adds (a pool task, an --annotate'd function)."""
    nid = STATE.name_id(kind, INJECTED_DOMAIN, name, "")
    pushed = injected_push(name)
    t0 = now()
    try:
        return func(*args, **kwargs)
    except BaseException as exc:
        hide_frames(exc)
        raise
    finally:
        t1 = now()
        if pushed:
            injected_pop()
        STATE.add_range(t0, t1, nid)
        if flush:
            STATE.flush()
