"""multiprocessing and concurrent.futures: start method, process roles, one range per pool task.

* Start method: the default context of ``multiprocessing`` is pointed at the chosen method
  *without* setting it, so ``set_start_method()`` and ``get_context("x")`` in the script still
  work and win (an explicit choice is recorded in the event log).
* Roles: ``BaseProcess._bootstrap`` (every multiprocessing child, any start method) and the pool
  worker loops tell the child what it is.
* Pool tasks: the worker loops of ``multiprocessing.pool`` and ``concurrent.futures.process``
  read tasks from a queue; gpuscope wraps that queue's ``get`` so each task's function runs inside
  a range named after the user's function (``mapstar``/``_process_chunk`` are unwrapped).
* Pool jobs (``multiprocessing.pool``): the parent writes a ``J`` line when a job is submitted
  (``apply_async``/``map_async``/``imap``… create its result object), a worker a ``T`` line
  with the job and task number when it takes a task: the timeline's flow arrows (docs/EVENTS.md).
  Replacement functions keep the original ``__module__``/``__qualname__``, so pickling them into
  a child resolves to whatever that child has: the wrapper when it is injected, the original if not.
"""

import os
import sys
from _functools import partial as _partial   # built in: functools would import collections at start

from .disguise import disguise as _disguise
from .eventlog import FLUSH_NS, STATE, native_tid, now, safe
from .frames import hide_frames
from .procname import WORKER_ROLES, child_role, set_process_name, short_role, target_role

_ANNOTATE = bool(os.environ.get("GPUSCOPE_ANNOTATE", "").strip())   # as the hook: the patterns only with --annotate


def _apply_to_main():
    """--annotate's patterns applied to the script's functions (its module loads only with --annotate)."""
    if _ANNOTATE:
        from . import annotate_patterns

        annotate_patterns.apply_to_main()


# -- start method ------------------------------------------------------------------------------
@safe("forcing the start method")
def patch_context(context_module):
    method = os.environ.get("GPUSCOPE_START_METHOD", "default")
    default = getattr(context_module, "_default_context", None)
    concrete = getattr(context_module, "_concrete_contexts", {})
    if method != "default" and default is not None and method in concrete:
        if getattr(default, "_actual_context", None) is None:
            default._default_context = concrete[method]
    original = context_module.DefaultContext.set_start_method
    if getattr(original, "__wrapped__", None) is not None:
        return

    def set_start_method(self, method, force=False):
        try:
            result = original(self, method, force)
        except BaseException as exc:
            hide_frames(exc)
            raise
        try:
            if STATE.info.get("role") == "main" and method is not None:
                STATE.update(start_method=method, start_method_explicit=method)
        except Exception:
            pass
        return result

    context_module.DefaultContext.set_start_method = _disguise(set_start_method, original)


# -- roles ----------------------------------------------------------------------------------------
@safe("patching multiprocessing.process")
def patch_process(process_module):
    base = process_module.BaseProcess
    original = base._bootstrap
    if getattr(original, "__wrapped__", None) is not None:
        return

    def _bootstrap(self, *args, **kwargs):
        _on_child_start(self)
        code = original(self, *args, **kwargs)
        try:
            STATE.exit(code)
        except Exception:
            pass
        if _under_nsys():
            _exit_through_libc(code)
        return code

    base._bootstrap = _disguise(_bootstrap, original)
    start = base.start

    def start_(self, *args, **kwargs):
        _apply_to_main()
        t_call = now()
        role = _role_of(self)   # before start(), which deletes the Process object's target
        try:
            result = start(self, *args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise
        _child_started(t_call, self, role)
        return result

    base.start = _disguise(start_, start)


@safe("identifying a child being started")
def _role_of(proc):
    return target_role(proc)


@safe("recording a child's start")
def _child_started(t_call, proc, role):
    """A C line: when ``Process.start()`` was called and returned, the child's pid (the reference
    of the child's start-up phases, docs/EVENTS.md) and its role as its target says (a pool worker
    that ``terminate()`` ends before it has read its Process object never learns it)."""
    pid = getattr(proc, "pid", None)
    if pid:
        STATE.child_started(t_call, now(), pid, role or "")


def _exit_through_libc(code):
    """End a multiprocessing child through C ``exit()`` right after its work is done.

    Nsight Systems' injection flushes a process's buffers in C exit handlers. multiprocessing ends
    fork children with ``os._exit``, which skips them, and a pool's ``terminate()`` sends SIGTERM
    to workers that may still be finalizing: either way their NVTX ranges never reach the report.
    Only under ``gpuscope run --nsys``. Python ``atexit`` functions still run in spawn children
    (fork children never run them, as without gpuscope).
    """
    try:
        libc_exit = _libc_exit()
        if not STATE.info.get("forked"):
            import atexit

            atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        libc_exit(int(code or 0))
    except Exception as exc:
        STATE.error("flushing nsys in a fork child", exc)


@safe("identifying a multiprocessing child")
def _on_child_start(proc):
    if _under_nsys():
        _libc_exit()
    role, index, extra = child_role(proc)  # pool / executor / loky / DataLoader worker, manager, ...
    rank = STATE.info.get("rank")
    STATE.update(role=role, mp_name=getattr(proc, "name", "") or "", os_name=short_role(role, rank, index),
                 **extra)
    set_process_name(short_role(role, rank, index))
    _apply_to_main()


# -- pool tasks -----------------------------------------------------------------------------------
def _task_name(func, args):
    """The user's function behind a pool task (unwrapping multiprocessing's helpers)."""
    name = getattr(func, "__name__", "")
    if name in ("mapstar", "starmapstar") and args and isinstance(args[0], tuple) and args[0]:
        func = args[0][0]
    elif isinstance(func, _partial) and getattr(func.func, "__name__", "") == "_process_chunk":
        func = func.args[0] if func.args else func.func
    while isinstance(func, _partial):
        func = func.func
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or type(func).__name__


def _run_task(func, name):
    """Wrap one task so it runs inside a recorded (and, with nvtx, an NVTX) range."""
    def task(*args, **kwargs):
        from .nvtxwrap import call_in_range

        # flush per task: a pool may terminate its idle workers, keep the log whole per task
        try:
            return call_in_range("task", name, func, args, kwargs, flush=True)
        except BaseException as exc:
            hide_frames(exc)
            raise
    return task


_TAKEN: list = []                 # (t, tid, job, i) of tasks taken, not yet in the log
_TAKEN_FLUSH = [0]          # when they next go into STATE.buf (every FLUSH_NS, and at exit)


def _task_taken(job, i):
    """Note a task taken by this worker. T lines are formatted and written in batches (at most
    every FLUSH_NS, and at exit), never per task: a hot pool's per-task flush writes only its ranges.
    A batch is written when the task is taken, so a worker killed inside a long task (a pool's
    terminate() after a stop) still says which task it was in."""
    t = now()
    _TAKEN.append((t, native_tid(), job, i))
    if t > _TAKEN_FLUSH[0]:
        if not _TAKEN_FLUSH[0]:
            STATE.at_exit.append(_hand_over_taken)
            if not _TAKEN_FLUSH[1:]:
                os.register_at_fork(after_in_child=_forget_taken)   # a child does not write ours
                _TAKEN_FLUSH.append(True)
        _TAKEN_FLUSH[0] = t + FLUSH_NS
        _hand_over_taken()
        STATE.flush()


def _forget_taken():
    del _TAKEN[:]
    _TAKEN_FLUSH[0] = 0


def _hand_over_taken():
    items = _TAKEN[:]
    del _TAKEN[:len(items)]
    if items:
        STATE.buf.append("".join(["T\t%d\t%d\t%d\t%d\n" % item for item in items]))


def _wrap_pool_get(get):
    def wrapped_get(*args, **kwargs):
        task = get(*args, **kwargs)
        try:
            if isinstance(task, tuple) and len(task) == 5:
                job, i, func, fargs, kwds = task
                if callable(func):
                    if job.__class__ is int and i.__class__ is int:   # a T line: this task's job
                        _task_taken(job, i)
                    return (job, i, _run_task(func, _task_name(func, fargs)), fargs, kwds)
        except Exception as exc:
            STATE.error("pool task", exc)
        return task
    return wrapped_get


@safe("patching multiprocessing.pool")
def patch_pool(pool_module):
    original = pool_module.worker
    if getattr(original, "__wrapped__", None) is not None:
        return

    def worker(inqueue, outqueue, *args, **kwargs):
        try:
            _become_pool_worker()
            inqueue.get = _wrap_pool_get(inqueue.get)
        except Exception as exc:
            STATE.error("pool worker", exc)
        try:
            return original(inqueue, outqueue, *args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise

    pool_module.worker = _disguise(worker, original)
    _patch_pool_creation(pool_module)
    if _under_nsys():
        _patch_terminated_wait(pool_module)
    for cls in (getattr(pool_module, "ApplyResult", None), getattr(pool_module, "IMapIterator", None)):
        if cls is not None:
            _patch_job_submit(cls)


def _patch_job_submit(cls):
    """A J line when a pool job is created (its ``_job`` number is what its tasks carry)."""
    original = cls.__init__
    if getattr(original, "__wrapped__", None) is not None:
        return

    def __init__(self, *args, **kwargs):  # noqa: N807 - named as the method it stands for
        t = now()
        try:
            original(self, *args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise
        try:
            job = self._job
            if job.__class__ is int:
                STATE.buf.append("J\t%d\t%d\t%d\n" % (t, native_tid(), job))
        except Exception:
            pass

    cls.__init__ = _disguise(__init__, original)


def _patch_pool_creation(pool_module):
    """The script's functions exist by the time it creates a pool: apply --annotate to __main__."""
    original = pool_module.Pool.__init__

    def __init__(self, *args, **kwargs):  # noqa: N807 - named as the method it stands for
        _apply_to_main()
        try:
            return original(self, *args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise

    pool_module.Pool.__init__ = _disguise(__init__, original)


def _become_pool_worker():
    if STATE.info.get("role") not in WORKER_ROLES:
        STATE.update(role="pool worker")
    if _under_nsys():
        # Pool.terminate() ends idle workers with SIGTERM: exit through C exit() so nsys flushes.
        import signal

        _libc_exit()
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _flush_on_sigterm)
            if not STATE.info.get("forked"):   # no new thread in a fork child nsys traces before exec
                _arm_sigterm_fallback(signal)


TERM_AGAIN_S = 1.0   # a terminated pool worker still alive after this gets SIGTERM again


@safe("patching multiprocessing for terminated pool workers")
def _patch_terminated_wait(pool_module):
    """Under nsys, pool workers that ``Pool.terminate()`` ends get SIGTERM again every second.

    Under nsys a pool worker ends on SIGTERM through a Python handler (C ``exit()``, so nsys
    flushes: :func:`_become_pool_worker`). A Python handler runs when the main thread next checks
    for signals: a SIGTERM that lands just before the worker blocks in the task queue's lock
    (``sem_wait``) is never acted on, and the pool's terminate then waits for that worker for ever
    (seen in a fork pool under nsys, where the worker has no fallback thread). Sent again while
    the worker waits in the lock, SIGTERM interrupts the wait and the handler runs. Without
    gpuscope the default action kills the worker at once: this only restores that. Only the
    workers of a pool being terminated: any other process's ``terminate()`` is left alone.
    """
    import signal
    from multiprocessing import popen_fork

    cls = popen_fork.Popen
    wait = cls.__dict__.get("wait")
    terminate_pool = pool_module.Pool.__dict__.get("_terminate_pool")
    func = getattr(terminate_pool, "__func__", None)
    if wait is None or func is None or getattr(wait, "__wrapped__", None) is not None:
        return

    def _terminate_pool(pool_cls, *args, **kwargs):
        workers = args[3] if len(args) > 3 else kwargs.get("pool")
        for proc in workers or ():
            popen = getattr(proc, "_popen", None)
            if popen is not None:
                popen._gpuscope_pool_terminating = True
        return func(pool_cls, *args, **kwargs)

    def wait_(self, timeout=None):
        if timeout is not None or not getattr(self, "_gpuscope_pool_terminating", False):
            return wait(self, timeout)
        while True:
            code = wait(self, TERM_AGAIN_S)
            if code is not None:
                return code
            try:
                os.kill(self.pid, signal.SIGTERM)
            except OSError:
                pass

    pool_module.Pool._terminate_pool = classmethod(_disguise(_terminate_pool, func))
    cls.wait = _disguise(wait_, wait)


def _arm_sigterm_fallback(signal):
    """If the main thread cannot run the SIGTERM handler, end the process from a thread.

    Python runs a signal handler on the main thread, when it next runs Python code. A pool worker
    that terminate() catches blocked on the task queue's lock (the parent holds it for good) only
    gets there if the lock wait is interrupted; under nsys the signal can land on one of nsys's own
    threads, the wait goes on, and the worker (and the program's ``with Pool()``) would hang for
    ever where the default action would have killed it. Python's C handler also writes the signal's
    number to the wakeup fd, from any thread: a thread waiting on it ends the process 1 s later
    unless the handler did. Not armed when the program has a wakeup fd of its own.
    """
    import _thread

    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        old = None
    if old != -1:
        if old is not None:
            signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _thread.start_new_thread(_wait_for_sigterm, (r, int(signal.SIGTERM)))


def _wait_for_sigterm(fd, signum):
    import time

    try:
        while True:
            data = os.read(fd, 64)
            if not data:
                return
            if signum in data:
                break
        time.sleep(1.0)    # the main thread's handler normally ends the process long before this
        if STATE.exited:   # it is ending on its own (see _flush_on_sigterm)
            return
        STATE.exit(128 + signum)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        _libc_exit()(128 + signum)   # C exit(): nsys's exit handlers flush its buffers
    except Exception as exc:
        STATE.error("ending a pool worker on SIGTERM", exc)


_LIBC: dict = {}


def _libc_exit():
    """C ``exit``, loaded ahead of time (a signal handler must not be the first to import ctypes)."""
    if "exit" not in _LIBC:
        import ctypes

        _LIBC["exit"] = ctypes.CDLL(None).exit
    return _LIBC["exit"]


def _under_nsys():
    """Recorded by `gpuscope run --nsys`, and nsys traces this process (fork children: only with
    fork tracing)."""
    if os.environ.get("GPUSCOPE_UNDER_NSYS") != "1":
        return False
    return not STATE.info.get("forked") or os.environ.get("GPUSCOPE_NSYS_FORK") == "1"


def _flush_on_sigterm(signum, _frame):
    if STATE.exited:
        # The worker is already ending on its own (its task loop returned and the pool's
        # terminate() caught it on the way out): ending it here would drop the exit record
        # being written. Its own exit goes on, through C exit() as well.
        return
    STATE.exit(128 + signum)
    _exit_through_libc(128 + signum)


class _CallItemProxy:
    """A concurrent.futures work item whose ``fn`` runs inside a recorded range."""

    __slots__ = ("work_id", "fn", "args", "kwargs")

    def __init__(self, item):
        self.work_id = item.work_id
        self.args = item.args
        self.kwargs = item.kwargs
        self.fn = _run_task(item.fn, _task_name(item.fn, item.args))


@safe("patching concurrent.futures.process")
def patch_executor(cf_module):
    original = cf_module._process_worker
    if getattr(original, "__wrapped__", None) is not None:
        return

    def _process_worker(call_queue, result_queue, *args, **kwargs):
        try:
            _become_pool_worker()
            get = call_queue.get

            def wrapped_get(*a, **k):
                item = get(*a, **k)
                if item is not None and hasattr(item, "fn"):
                    try:
                        return _CallItemProxy(item)
                    except Exception as exc:
                        STATE.error("executor task", exc)
                return item
            call_queue.get = wrapped_get
        except Exception as exc:
            STATE.error("executor worker", exc)
        try:
            return original(call_queue, result_queue, *args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise

    cf_module._process_worker = _disguise(_process_worker, original)
    executor = cf_module.ProcessPoolExecutor
    init = executor.__init__

    def __init__(self, *args, **kwargs):  # noqa: N807 - named as the method it stands for
        _apply_to_main()
        try:
            return init(self, *args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise

    executor.__init__ = _disguise(__init__, init)


@safe("patching multiprocessing.spawn")
def patch_spawn(spawn_module):
    """In a spawn child the script (or ``-m`` module) is re-imported as __mp_main__: apply
    --annotate to it before the process object (and its target) is unpickled."""
    if not _ANNOTATE:
        return
    from . import annotate_patterns

    if not annotate_patterns.PATTERNS:
        return
    for name in ("_fixup_main_from_path", "_fixup_main_from_name"):
        original = getattr(spawn_module, name, None)
        if original is not None and getattr(original, "__wrapped__", None) is None:
            setattr(spawn_module, name, _disguise(_after_fixup(original), original))


def _after_fixup(original):
    def fixup(*args, **kwargs):
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise
        _apply_to_main()
        return result
    return fixup


def fork_start_method():
    """How a fork child came to be: from the forkserver, or a plain fork."""
    return "forkserver" if STATE.info.get("role") == "forkserver" else "fork"

