"""Bytes that multiprocessing pickles to send through pipes and queues (the ``pickled`` I line).

Installed lazily, when ``multiprocessing.reduction`` is imported: ``ForkingPickler.dumps`` (the
one pickler behind ``Connection.send``, ``Queue.put``'s feeder thread, ``SimpleQueue.put`` and a
pool's task and result queues) is wrapped to add the size of what it returned to a counter. The
counter is cumulative per process and reaches the event log as an ``I`` line
``{"pickled": {"bytes", "calls", "max_bytes", "seconds"}}`` at most every ``FLUSH_NS`` (checked on
the call itself: no thread, no timer) and once more when the process ends (``STATE.exit`` runs
``STATE.at_exit``). ``seconds`` is the time spent inside ``dumps``.

The wrapper returns exactly what ``dumps`` returned and lets its exceptions through unchanged;
a failure of its own bookkeeping is swallowed. Standard library only.
"""

import os
import time

from .disguise import disguise

FLUSH_NS = 500_000_000
_clock = time.perf_counter_ns
_C = {"bytes": 0, "calls": 0, "max_bytes": 0, "ns": 0, "next": 0, "pid": 0, "written": 0}


def _state():
    from .eventlog import STATE

    return STATE


def _line():
    return {"pickled": {"bytes": _C["bytes"], "calls": _C["calls"], "max_bytes": _C["max_bytes"],
                        "seconds": round(_C["ns"] / 1e9, 6)}}


def flush():
    """Write the counter if it changed since the last line (also called at exit)."""
    try:
        if _C["pid"] != os.getpid() or _C["calls"] == _C["written"]:
            return
        _C["written"] = _C["calls"]
        _state().emit(_line())
    except Exception:
        pass


def _reset():
    """In a fork child: its own counter (registered with os.register_at_fork by ``patch``)."""
    _C.update(bytes=0, calls=0, max_bytes=0, ns=0, next=0, pid=os.getpid(), written=0)


def _count(size, t0, t1):
    # No lock: these dict updates make no call, and the GIL switches threads only at calls and
    # backward jumps; a free-threaded build may lose a count now and then, which a 100 MB
    # threshold does not notice.
    c = _C
    c["bytes"] += size
    c["calls"] += 1
    c["ns"] += t1 - t0
    if size > c["max_bytes"]:
        c["max_bytes"] = size
    if t1 >= c["next"]:
        c["next"] = t1 + FLUSH_NS
        flush()


def patch(module):
    """Wrap ``module.ForkingPickler.dumps`` (a classmethod) once."""
    cls = getattr(module, "ForkingPickler", None)
    original = cls.__dict__.get("dumps") if cls is not None else None
    func = getattr(original, "__func__", None)
    if func is None or getattr(func, "__gpuscope__", False):
        return

    def dumps(klass, obj, protocol=None):
        t0 = _clock()
        result = func(klass, obj, protocol)
        try:
            _count(len(result), t0, _clock())
        except Exception:
            pass
        return result

    cls.dumps = classmethod(disguise(dumps, func, __gpuscope__=True))
    try:
        if not _C["pid"]:
            _C["pid"] = os.getpid()
            os.register_at_fork(after_in_child=_reset)
        hooks = _state().at_exit
        if flush not in hooks:
            hooks.append(flush)
    except Exception:
        pass

