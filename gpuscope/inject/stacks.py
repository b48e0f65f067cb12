"""Python stacks on request: every thread of this process dumps on a rarely used real-time signal.

``faulthandler`` writes from its C signal handler, so a dump arrives even from a process stuck in
C code holding the GIL (a deadlocked lock, a blocking read). The signal is ``SIGRTMAX - 2``
(``GPUSCOPE_STACKS_SIGNAL`` overrides the number); glibc and common libraries use the low
real-time signals, nothing in the standard library uses this one.

``chain=False``: ours is registered only over the default disposition, and chaining to the default
action of a real-time signal would end the process after the dump.

A program's own choice wins: if the signal is not at its default disposition when the process
starts (an inherited ``SIG_IGN``), nothing is registered; a program that installs its own handler
later replaces ours (``gpuscope stacks`` looks for ``stacks/<pid>.dump`` and reads the process's
caught-signal mask before it sends anything: a process whose signal is back at its default, fatal
action is read from outside instead).

One file per process, ``<run dir>/stacks/<pid>.dump``: faulthandler's text, appended per request,
and a line ``# thread <ident> <native_id> <name>`` (each on a line of its own, after a newline)
for every started thread: faulthandler prints only thread idents. The main thread's line is
written once the signal is registered. (A second file per process for the names would cost a file
creation in every process's start.)
Standard library only (and the event log's ``open_append``); never raises into the program.
"""

import os
import sys

from .eventlog import open_append

_STATE = {"fd": -1, "dir": "", "signum": 0}   # fd: the dump file faulthandler writes to


def signal_number():
    """The signal gpuscope asks for stacks with (``SIGRTMAX - 2`` unless overridden)."""
    import _signal  # built in: ``signal`` would import enum in every process

    value = os.environ.get("GPUSCOPE_STACKS_SIGNAL", "")
    if value.isdigit():
        return int(value)
    return int(_signal.SIGRTMAX) - 2


THREAD_LINE = "# thread "


def _thread_line(ident, native_id, name):
    """A thread's name for the dump file; the leading newline keeps it a line of its own even if it
    lands in the middle of a dump's line (a thread started while another dumps)."""
    return "\n%s%d %d %s\n" % (THREAD_LINE, ident or 0, native_id or 0, str(name).replace("\n", " "))


def _write_line(text):
    fd = _STATE["fd"]
    if fd >= 0:
        os.write(fd, text.encode("utf-8", "replace"))


def _register():
    """Open this process's dump file and register the signal (in a fresh process or a fork child)."""
    import _thread
    import faulthandler

    pid = os.getpid()
    folder = _STATE["dir"]
    old = _STATE["fd"]
    # a descriptor, not a file object: faulthandler writes to the descriptor either way
    fd = open_append(os.path.join(folder, "%d.dump" % pid))
    faulthandler.register(_STATE["signum"], file=fd, all_threads=True, chain=False)
    _STATE["fd"] = fd
    if old >= 0:
        try:
            os.close(old)  # the parent's, inherited by a fork child
        except OSError:
            pass
    threading = sys.modules.get("threading")  # not imported for it: a fresh process has one thread
    name = threading.current_thread().name if threading is not None else "MainThread"
    _write_line(_thread_line(_thread.get_ident(), _thread.get_native_id(), name))


def install(run_dir, when_imported):
    """Register the dump signal for this process and its fork children; record thread names."""
    try:
        import _signal

        signum = signal_number()
        if _signal.getsignal(signum) not in (_signal.SIG_DFL, None):
            return False  # inherited SIG_IGN (or a handler): the program's choice, leave it
        _STATE.update(dir=os.path.join(run_dir, "stacks"), signum=signum)
        _register()
        os.register_at_fork(after_in_child=_after_fork_in_child)
        when_imported("threading", _watch_threads)
        return True
    except Exception:
        return False


def _after_fork_in_child():
    try:
        if _STATE["fd"] >= 0:
            _register()
    except Exception:
        pass


def _watch_threads(threading_module):
    """Write a started thread's ``ident native_id name`` line to this process's dump file."""
    thread = threading_module.Thread
    original = getattr(thread, "_set_native_id", None)
    if original is None or getattr(original, "__gpuscope_stacks__", False):
        return

    def _set_native_id(self):
        original(self)
        try:
            _write_line(_thread_line(self._ident, self._native_id, self.name))
        except Exception:
            pass

    _set_native_id.__gpuscope_stacks__ = True
    _set_native_id.__wrapped__ = original
    for attr in ("__gpuscope__",):
        if getattr(original, attr, False):
            setattr(_set_native_id, attr, True)
    thread._set_native_id = _set_native_id

