"""How this process ends: its exit status and its own CPU time and peak memory, measured at exit.

The exit record (``X`` line, docs/EVENTS.md) carries what the kernel counted for this process:
``cpu_s`` (``CLOCK_PROCESS_CPUTIME_ID``: every thread, no children, exact), its split
``cpu_user_s`` and ``cpu_system_s`` (``os.times``: at the kernel's clock tick) and ``hwm_kib``
(``VmHWM`` of ``/proc/self/status``). Peak RSS is ``VmHWM``, not ``ru_maxrss``: after ``exec``
Linux carries the old address space's peak into ``ru_maxrss``, so a spawn child or a subprocess
of a 300 MiB parent would report 300 MiB there, while ``VmHWM`` belongs to its own address space
(a fork child shares its parent's pages, and counts them, in both).

The exit status: ``os._exit(n)`` and multiprocessing's ``_bootstrap`` pass theirs; at ``atexit``
an unhandled exception (``sys.last_value``, set by the interpreter before exit handlers run) is 1
(``KeyboardInterrupt``: -2, Python ends the process with SIGINT then),
a ``sys.exit(arg)`` call is what Python makes of ``arg``, and the end of the program is 0.
Standard library only; never raises.
"""

import os
import sys
import time

from .procself import status_kib


_EXIT = {"code": None, "how": None}
_original_exit = sys.exit


def exit_code_of(arg):
    """The status Python's interpreter makes of ``sys.exit(arg)``."""
    if arg is None:
        return 0
    if isinstance(arg, int):
        return int(arg) & 0xFF  # what the parent's wait() sees
    return 1  # a message: printed to stderr, status 1


def _exit(*args):
    try:
        _EXIT["code"] = exit_code_of(args[0] if args else None)
        _EXIT["how"] = "sys.exit"
    except Exception:
        pass
    return _original_exit(*args)


def install():
    """Remember the argument of ``sys.exit`` (the call still raises the same SystemExit)."""
    if getattr(sys.exit, "__gpuscope__", False):
        return
    for attr in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(_exit, attr, getattr(_original_exit, attr))
        except (AttributeError, TypeError):
            pass
    _exit.__gpuscope__ = True
    _exit.__wrapped__ = _original_exit
    sys.exit = _exit


def status_at_exit():
    """(exit code, how) for a process ending through its interpreter's exit handlers."""
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if isinstance(last, KeyboardInterrupt):
        return -2, "KeyboardInterrupt"  # Python ends the process with SIGINT: wait() sees -2
    if last is not None:
        return 1, "exception"
    if _EXIT["how"] is not None:
        return _EXIT["code"], _EXIT["how"]
    return 0, "end"


def forget():
    """In a fork child: the parent's ``sys.exit`` call is not the child's."""
    _EXIT["code"] = _EXIT["how"] = None


def usage():
    """This process's CPU seconds (all, then user and system) and peak memory, as the kernel counted
    them. ``cpu_s`` is exact (``CLOCK_PROCESS_CPUTIME_ID``, every thread); its split into user and
    system time comes at the clock tick of ``os.times``. ``getrusage`` gives the split in
    microseconds, but the kernel derives it from its own tick samples too, and ``resource`` would
    be one more import at every exit."""
    t = os.times()
    out = {"cpu_s": round(time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID), 6),
           "cpu_user_s": round(t.user, 6), "cpu_system_s": round(t.system, 6)}
    hwm = _vm_hwm_kib()
    if hwm is not None:
        out["hwm_kib"] = hwm
    return out


def _vm_hwm_kib():
    """``VmHWM`` of ``/proc/self/status`` (read by :mod:`procself`, the hook's one /proc reader)."""
    return status_kib(b"VmHWM")
