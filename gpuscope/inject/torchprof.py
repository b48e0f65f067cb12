"""``gpuscope run --torch-profile``: torch.profiler in the program's torch processes, no edits.

Loaded by the hook only when ``GPUSCOPE_TORCH_PROFILE`` is set, and run when the process imports
torch (a post-import callback). In a selected process it starts ``torch.profiler.profile`` (CPU
activity, CUDA too where available) and saves one gzip Chrome trace per process (one per cycle
with a schedule) in ``<run>/torch/`` at exit, with ``<stem>.meta.json`` beside it: the process,
its rank, the trace files, their event counts and the offset from the profiler's clock to
gpuscope's (CLOCK_MONOTONIC) with its uncertainty. The meta file is written when profiling starts
("recording"), so a process killed before it saved is still named by the run.

With a schedule a step is one ``optimizer.step()`` (torch's global optimizer step hook); without
one the whole process is profiled. A program that starts its own profiler keeps it: gpuscope's
stops first (Kineto allows one at a time) and saves what it had, and the traces the program
exports are listed in the meta file for the run to collect. docs/TORCH-PROFILER.md.
Standard library at module level; torch is already imported when any of this runs.
"""

import json
import os
import time

from . import procself
from .disguise import disguise
from .eventlog import STATE, now
from .procname import env_rank

ENV = "GPUSCOPE_TORCH_PROFILE"
FOLDER = "torch"                  # in the run folder
META_SUFFIX = ".meta.json"
CLOCK_MARK = "gpuscope:clock"     # the user annotation whose begin the offset is measured on
_MARKS = 3                        # the first record_function of a process is slow: keep the tightest
_SKIP_ROLES = ("torchrun agent", "resource tracker", "forkserver")


class _Profiling:
    """This process's profiling: gpuscope's profiler, its cycles, and the meta file's content."""

    def __init__(self, config, stem):
        self.config = config
        self.stem = stem
        self.pid = os.getpid()
        self.prof = None
        self.cycle = 0
        self.marks = []            # (monotonic before, monotonic after) of each clock mark this cycle
        self.running = False
        self.step_hook = None
        self.meta = {"pid": self.pid, "rank": env_rank(), "role": STATE.info.get("role"),
                     "state": "recording", "traces": [], "program_traces": [], "problems": []}


_current = None
_exporting = [0]   # nesting of the program's export calls (the new API calls the old one)
_own = [False]     # gpuscope's own calls into torch.profiler (not the program's)
_kineto_started = [False]   # Kineto reads its log level once, at its first start
_program_running: list = []   # the program's profilers started and not yet stopped (legacy objects)


def config_from_env():
    """The options of ``GPUSCOPE_TORCH_PROFILE`` (JSON), None when absent or unreadable."""
    text = os.environ.get(ENV, "")
    if not text.strip():
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def selected(config, role, rank):
    """Whether a process of this role and rank is profiled (``ranks``: None for all)."""
    if role in _SKIP_ROLES:
        return False
    ranks = config.get("ranks")
    return ranks is None or (rank is not None and rank in ranks)


def on_torch(torch):
    """Post-import callback of ``torch``: start profiling if this process is selected."""
    global _current
    config = config_from_env()
    if config is None or _current is not None or not STATE.run_dir:
        return
    if not selected(config, STATE.info.get("role", ""), env_rank()):
        return
    rank = env_rank()
    stem = ("rank%d-%d" % (rank, os.getpid())) if rank is not None else ("p%d" % os.getpid())
    current = _current = _Profiling(config, stem)
    _write_meta(current)
    _patch_program_profiler(torch)
    _guard_gloo_teardown()
    _start(torch, current)
    import atexit

    atexit.register(at_exit)
    os.register_at_fork(after_in_child=_forget_in_child)


def _start(torch, current):
    from torch.profiler import ProfilerActivity, profile, schedule

    config = current.config
    activities = [ProfilerActivity.CPU]
    if _cuda_available(torch):
        activities.append(ProfilerActivity.CUDA)
    kwargs = dict(activities=activities, record_shapes=bool(config.get("shapes")),
                  profile_memory=bool(config.get("memory")), with_stack=bool(config.get("stack")))
    steps = config.get("schedule")
    if steps:
        wait, warmup, active, repeat = (list(steps) + [0])[:4]
        kwargs["schedule"] = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
        kwargs["on_trace_ready"] = _trace_ready
    current.prof = profile(**kwargs)
    _own_call(current.prof.start)
    current.running = True
    if steps:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        current.step_hook = register_optimizer_step_post_hook(_on_optimizer_step)
    _mark_if_recording(current)


def _cuda_available(torch):
    """A CUDA build with a GPU, asked through NVML: ``torch.cuda.is_available()`` would initialise
    the CUDA driver here, at import, and CUDA then fails in the program's fork children."""
    if not getattr(torch.version, "cuda", None):
        return False
    try:
        return torch.cuda._device_count_nvml() > 0
    except Exception:
        return False


def _quiet_kineto(start, *args):
    """Kineto prints a line on stderr at each start and stop unless its log level is set before
    its first start: set it for that moment only, when the program has not set it itself."""
    if "KINETO_LOG_LEVEL" in os.environ:
        return start(*args)
    os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        return start(*args)
    finally:
        os.environ.pop("KINETO_LOG_LEVEL", None)


def _own_call(fn, *args):
    """gpuscope's own call into the profiler (quiet until Kineto has started once)."""
    _own[0] = True
    try:
        if _kineto_started[0]:
            return fn(*args)
        result = _quiet_kineto(fn, *args)
        prof = _current.prof if _current is not None else None
        _kineto_started[0] = getattr(prof, "profiler", None) is not None
        return result
    finally:
        _own[0] = False


def _on_optimizer_step(optimizer, args, kwargs):
    """torch's global optimizer step hook: one optimizer step is one profiler step."""
    current = _current
    if current is None or not current.running or current.pid != os.getpid():
        return
    try:
        _own_call(current.prof.step)
        _mark_if_recording(current)
    except Exception as exc:
        STATE.error("torch profiler step", exc)


def _mark_if_recording(current):
    """The clock marks, once per recording cycle, as soon as the profiler records."""
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerAction

    action = getattr(current.prof, "current_action", ProfilerAction.RECORD)
    if current.marks or action not in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
        return
    for _ in range(_MARKS):
        t0 = now()
        with record_function(CLOCK_MARK):
            pass
        current.marks.append((t0, now()))


def _trace_ready(prof):
    """on_trace_ready of a scheduled profiler: one cycle ended."""
    current = _current
    if current is not None and current.pid == os.getpid():
        _save(current, prof)


def _save(current, prof):
    """Export the profiler's last cycle as gzip Chrome trace and note it in the meta file."""
    name = current.stem + (".c%d" % (current.cycle + 1) if current.cycle else "") + ".json.gz"
    path = os.path.join(STATE.run_dir, FOLDER, name)
    entry = {"file": name, "cycle": current.cycle + 1}
    try:
        _own_call(prof.export_chrome_trace, path)
        events = prof.profiler.kineto_results.events()
        entry["events"] = len(events)
        entry.update(clock_from_marks(current.marks, [(e.start_ns(), e.duration_ns()) for e in events
                                                      if e.name() == CLOCK_MARK]))
    except Exception as exc:
        entry["error"] = "%s: %s" % (type(exc).__name__, exc)
    current.cycle += 1
    current.marks = []
    current.meta["traces"].append(entry)
    _write_meta(current)


def clock_from_marks(marks, events):
    """The offset (ns) to add to a profiler timestamp to get CLOCK_MONOTONIC, and its uncertainty.

    Each mark's begin lies between the monotonic time read before it and the one read after it,
    less its duration: the middle of that window is the estimate, half its width the uncertainty.
    ``marks``: (before, after) monotonic ns; ``events``: (begin, duration) ns in the profiler's clock.
    """
    best = None
    for (before, after), (begin, duration) in zip(marks, events):
        latest = max(before, after - duration)
        half = (latest - before + 1) // 2
        if best is None or half < best[1]:
            best = ((before + latest) // 2 - begin, half)
    if best is None:
        return {"clock_offset_ns": None, "clock_uncertainty_ns": None, "clock_method": None}
    return {"clock_offset_ns": best[0], "clock_uncertainty_ns": best[1], "clock_method": "marker"}


def realtime_clock():
    """The offset from CLOCK_REALTIME (Kineto's clock, for traces without gpuscope's marks) to
    CLOCK_MONOTONIC, read between two monotonic reads; half their gap is the uncertainty."""
    t0 = now()
    real = time.time_ns()
    t1 = now()
    return {"clock_offset_ns": (t0 + t1) // 2 - real, "clock_uncertainty_ns": (t1 - t0 + 1) // 2,
            "clock_method": "realtime"}


def _stop(current, why):
    """Stop gpuscope's profiler and save what it recorded (``why``: a note, or None)."""
    if not current.running or current.pid != os.getpid():
        return
    current.running = False
    if current.step_hook is not None:
        current.step_hook.remove()
    prof = current.prof
    try:
        _own_call(prof.stop)   # a scheduled profiler saves a cycle it was recording (_trace_ready)
        if not current.config.get("schedule"):
            _save(current, prof)
        elif not current.meta["traces"]:
            current.meta["problems"].append("the program ended after %d optimizer steps, before the "
                                            "schedule's first active step ended" % prof.step_num)
    except Exception as exc:
        current.meta["problems"].append("stopping the profiler failed: %s: %s" % (type(exc).__name__, exc))
    if why:
        current.meta["problems"].append(why)
    current.meta["state"] = "saved"
    _write_meta(current)


def at_exit(how="exit"):
    """At exit (and at ``os._exit``): stop and save, the program's unstopped profilers too; never raises."""
    current = _current
    try:
        if current is not None and current.pid == os.getpid():
            if current.running:
                _stop(current, None)
            _save_unstopped(current)
            settle_gloo_workers()
    except Exception as exc:
        STATE.error("torch profiler at %s" % how, exc)


def _save_unstopped(current):
    """A profiler the program started and never stopped: stopped now, its trace saved in the run."""
    for k, prof in enumerate(list(_program_running), 1):
        _program_running.remove(prof)
        path = os.path.join(STATE.run_dir, FOLDER, "%s.unstopped%d.json" % (current.stem, k))
        try:
            _own_call(prof.__exit__, None, None, None)
            _own_call(prof.export_chrome_trace, path)
        except Exception as exc:
            current.meta["problems"].append("the program's profiler, left running at exit, could not be "
                                            "saved: %s: %s" % (type(exc).__name__, exc))
            continue
        entry = {"path": path, "unstopped": True}
        entry.update(realtime_clock())
        current.meta["program_traces"].append(entry)
        current.meta["problems"].append("the program's profiler was still running at exit: gpuscope "
                                        "stopped it and saved its trace")
    _write_meta(current)


def _forget_in_child():
    """A fork child holds a copy of its parent's profiler: it is not this process's to stop."""
    global _current
    _current = None


# -- gloo's worker threads at teardown -------------------------------------------------------
# While a profiler records, each gloo work made during backward keeps a copy of the thread's state,
# Python objects included (autograd's stashed context), so the worker thread that drops the work's
# last reference takes the GIL. A process group freed later with the GIL held (a DDP model freed
# when main() returns, after destroy_process_group) joins those threads: if one is still waiting
# for the GIL then, neither ever goes on. So the GIL is let go until the workers have dropped theirs.
GLOO_THREAD = "pt_gloo_runloop"   # the name gloo gives its worker threads (comm)
_SETTLE_LIMIT_S = 2.0             # a worker starved of CPU that long is left to the program
_SETTLE_POLL_S = 0.005


def _guard_gloo_teardown():
    """Wrap ``torch.distributed``'s destroy_process_group so that gloo's workers settle after it."""
    import sys

    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    original = getattr(c10d, "destroy_process_group", None)
    if original is None or getattr(original, "__gpuscope__", False):
        return

    def destroy_process_group(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        finally:
            settle_gloo_workers()

    disguise(destroy_process_group, original)
    destroy_process_group.__gpuscope__ = True
    c10d.destroy_process_group = destroy_process_group
    package = sys.modules.get("torch.distributed")
    if getattr(package, "destroy_process_group", None) is original:
        package.destroy_process_group = destroy_process_group


def _gloo_workers():
    """This process's gloo worker threads: thread id -> its state letter (R, S, D...)."""
    return procself.thread_states(GLOO_THREAD)


def settle_gloo_workers(limit_s=_SETTLE_LIMIT_S):
    """Let go of the GIL until no gloo worker is runnable at two looks in a row (a worker waiting
    for the GIL is woken when it is let go); returns whether they settled. Never raises."""
    try:
        if not _gloo_workers():
            return True
        deadline = time.monotonic() + limit_s
        quiet = 0
        while quiet < 2:
            if time.monotonic() > deadline:
                return False
            time.sleep(_SETTLE_POLL_S)
            busy = [s for s in _gloo_workers().values() if s not in ("S", "Z")]
            quiet = 0 if busy else quiet + 1
        return True
    except Exception:
        return False


# -- the program's own profiler --------------------------------------------------------------
def _patch_program_profiler(torch):
    """Step aside when the program starts a profiler; note the traces it exports."""
    from torch.autograd import profiler as legacy
    from torch.profiler import profiler as kineto

    _wrap(legacy.profile, "_prepare_trace", _before_program_profiler)
    _track_running(legacy.profile)
    _wrap(legacy.emit_nvtx, "__enter__", _before_program_profiler)
    _wrap_export(kineto._KinetoProfile)
    _wrap_export(legacy.profile)


def _track_running(cls):
    """Remember the program's profilers between their start and their stop (saved at exit if never stopped)."""
    start, stop = cls._start_trace, cls.__exit__

    def _start_trace(self, *args, **kwargs):
        result = start(self, *args, **kwargs)
        if not _own[0] and self not in _program_running:
            _program_running.append(self)
        return result

    def exit_(self, *args, **kwargs):
        if self in _program_running:
            _program_running.remove(self)
        return stop(self, *args, **kwargs)

    disguise(_start_trace, start)
    disguise(exit_, stop)
    cls._start_trace, cls.__exit__ = _start_trace, exit_


def _wrap(cls, name, before):
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        if not _own[0]:
            before()
        return original(self, *args, **kwargs)

    disguise(wrapper, original)
    setattr(cls, name, wrapper)


def _before_program_profiler():
    current = _current
    try:
        if current is not None and current.running and current.pid == os.getpid():
            _stop(current, "gpuscope's profiler stopped when the program started its own "
                           "(one profiler at a time); the program's traces are collected")
            current.meta["state"] = "gave-way"
            _write_meta(current)
    except Exception as exc:
        STATE.error("torch profiler, stepping aside", exc)


def _wrap_export(cls):
    original = cls.export_chrome_trace

    def export_chrome_trace(self, path, *args, **kwargs):
        if _own[0]:
            return original(self, path, *args, **kwargs)
        _exporting[0] += 1
        try:
            result = original(self, path, *args, **kwargs)
        finally:
            _exporting[0] -= 1
        if _exporting[0] == 0:
            _note_program_trace(path)
        return result

    disguise(export_chrome_trace, original)
    cls.export_chrome_trace = export_chrome_trace


def _note_program_trace(path):
    current = _current
    try:
        if current is None or current.pid != os.getpid():
            return
        entry = {"path": os.path.abspath(os.fspath(path))}
        entry.update(realtime_clock())
        current.meta["program_traces"].append(entry)
        _write_meta(current)
    except Exception as exc:
        STATE.error("torch profiler, noting a trace", exc)


def _write_meta(current):
    """The meta file, replaced whole (a reader never sees half of it)."""
    folder = os.path.join(STATE.run_dir, FOLDER)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, current.stem + META_SUFFIX)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(current.meta, fh)
        os.replace(tmp, path)
    except Exception as exc:
        STATE.error("torch profiler meta", exc)

