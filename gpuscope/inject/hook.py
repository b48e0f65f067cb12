"""Activation of the injection in one process: identity, log, hooks, fork handling."""

import os
import sys

from . import exitstatus, importhook
from .eventlog import STATE, now, python_version
from .procname import env_rank, name_python_threads, ray_script_role, set_process_name, short_role

_SCRIPT = os.environ.get("GPUSCOPE_SCRIPT", "")
_MODULE = os.environ.get("GPUSCOPE_MODULE", "")


def _orig_argv():
    return list(getattr(sys, "orig_argv", None) or [sys.executable] + list(sys.argv))


def detect_role(argv):
    """The role of a fresh interpreter, from its command line and environment."""
    code = ""
    if "-c" in argv:
        i = argv.index("-c")
        code = argv[i + 1] if i + 1 < len(argv) else ""
    if "multiprocessing.spawn" in code or "--multiprocessing-fork" in argv:
        return "spawn child", "spawn"
    if "multiprocessing.resource_tracker" in code:
        return "resource tracker", "spawn"
    if "multiprocessing.forkserver" in code:
        return "forkserver", "spawn"
    if "torch.distributed.run" in argv or os.path.basename(argv[1] if len(argv) > 1 else "") == "torchrun":
        return "torchrun agent", None
    if env_rank() is not None and _is_script(argv):
        return "rank %d" % env_rank(), None
    if _is_script(argv) and _claim_main():
        return "main", None
    return ray_script_role(argv) or "subprocess", None


def _is_script(argv):
    """Does this command line run the run's script (or its ``-m`` module)?"""
    if _MODULE:
        return _runs_module(argv)
    if not _SCRIPT:
        return False
    target = _file_id(_SCRIPT)
    if target is None:
        return False
    for arg in argv[1:4]:
        if arg and not arg.startswith("-") and _file_id(arg) == target:
            return True
    return False


def _file_id(path):
    """The file ``path`` names, as (device, inode): the same file however it is reached (symbolic
    links, another working folder). One ``stat``; ``os.path.realpath`` takes one per folder of the
    path, in every process's start. None when there is no such file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _runs_module(argv):
    """``python [options] -m MODULE ...`` (torchrun starts its workers as ``python -u -m MODULE``)."""
    for i, arg in enumerate(argv[1:6], 1):
        if arg == "-m":
            return i + 1 < len(argv) and argv[i + 1] == _MODULE
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:] == _MODULE
        if not arg.startswith("-"):
            return False
    return False


def _claim_main():
    """Only the first process running the script is 'main' (a re-run via subprocess is not)."""
    try:
        fd = os.open(os.path.join(STATE.run_dir, "main.claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    except OSError:
        return False


def _header(role, start_method, forked):
    rank = env_rank()
    local_rank = os.environ.get("LOCAL_RANK") if rank is not None else None
    method = start_method or os.environ.get("GPUSCOPE_START_METHOD", "default")
    return {
        "run_id": os.environ.get("GPUSCOPE_RUN_ID"),
        "role": role, "start_method": method, "rank": rank,
        "local_rank": int(local_rank) if local_rank and local_rank.isdigit() else None,
        "forked": forked, "argv": _orig_argv() if not forked else None,
        "executable": sys.executable, "python": python_version(),
        "nvtx": None,
    }


def _name_process():
    info = STATE.info
    name = short_role(info.get("role", ""), info.get("rank"))
    if set_process_name(name):
        STATE.update(os_name=name)


def _after_fork_in_child():
    try:
        parent = dict(STATE.info)
        STATE.forget_parent()
        exitstatus.forget()
        nvtxwrap = _loaded("nvtxwrap")
        if nvtxwrap is not None:   # not loaded: nvtx was never imported, nothing to forget
            nvtxwrap.after_fork_in_child()
        mpwrap = _loaded("mpwrap")
        method = mpwrap.fork_start_method() if mpwrap is not None else "fork"
        header = _header("fork child", method, True)
        header["rank"] = parent.get("rank")
        header["parent_role"] = parent.get("role")
        header["nvtx"] = parent.get("nvtx")
        STATE.open(header)
        set_process_name(short_role("fork child", parent.get("rank")))
    except Exception as exc:
        STATE.error("after fork", exc)


_os_exit = os._exit


def _exit_now(code):
    """``os._exit`` skips atexit: record the end and flush this process's log first."""
    torchprof = _loaded("torchprof")
    if torchprof is not None:   # os._exit skips atexit: save the torch profiler's trace first
        torchprof.at_exit("os._exit")
    try:
        STATE.exit(code, "os._exit")
    except Exception:
        pass
    _os_exit(code)


def _at_exit():
    try:
        code, how = exitstatus.status_at_exit()
        STATE.exit(code, how)
    except Exception:
        pass


def activate(boot_ns=None, load=None):
    """Called once per fresh interpreter by the startup hook (``boot_ns``: when it began; ``load``:
    its loader of this package's modules, ``load("mpwrap")``, for what this process's role needs)."""
    if not STATE.run_dir:
        return
    role, method = detect_role(_orig_argv())
    if load is not None and method == "spawn":   # a spawn child, resource tracker or forkserver: its
        try:                                     # command imports multiprocessing next, and with it
            load("frames")                       # the wrappers (post-import callbacks); loaded before
            load("mpwrap")                       # the log's anchor, so the start-up figures leave
            load("pickwatch")                    # them out as gpuscope's share (docs/COMPARE.md)
            load("reimport")                     # times the re-import of __main__ (inject/reimport.py)
        except Exception:                        # (imported as usual then, and an error logged there)
            pass
    STATE.open(_header(role, method, False))
    try:
        _install(role)
    except Exception as exc:
        STATE.error("activate", exc)
    if boot_ns is not None:
        _note_own_share(boot_ns)


def _note_own_share(boot_ns):
    """gpuscope's own share of this process's start: the hook's time in all (``hook_ns``) and
    before the log's anchor (``hook_before_anchor_ns``), so start-up figures can leave it out.
    Buffered: written with the process's next flush (a range, a task's end, or its exit)."""
    end = now()
    before = STATE.info.get("anchor_mono_ns", end) - boot_ns
    STATE.buf.append("I\t%d\t{\"hook_ns\": %d, \"hook_before_anchor_ns\": %d}\n" % (end, end - boot_ns, before))


def _install(role):
    import atexit

    atexit.register(_at_exit)
    exitstatus.install()
    _exit_now.__doc__ = _os_exit.__doc__
    os._exit = _exit_now  # fork children (multiprocessing's and the user's own) end through it
    os.register_at_fork(after_in_child=_after_fork_in_child)
    if role not in ("spawn child", "subprocess") and not role.startswith("ray "):
        _name_process()  # spawn children are named when they learn what they are (pool/process);
        # Ray names its own processes (ray::IDLE, ray::Counter.incr)
    importhook.install()
    from . import forkwatch, stacks  # findings: stacks on a signal, forks with threads, child exits
    stacks.install(STATE.run_dir, importhook.when_imported)
    forkwatch.install(importhook.when_imported)
    # findings' watchers, imported only when the program imports what they watch (docs/FINDINGS.md)
    importhook.when_imported("multiprocessing.reduction", _later("pickwatch"))       # bytes pickled
    importhook.when_imported("torch.cuda", _later("cudawatch", "on_torch_cuda"))     # fork after CUDA init
    importhook.when_imported("torch.utils.data.distributed", _later("samplerwatch"))  # set_epoch
    importhook.when_imported("multiprocessing.shared_memory", _later("shmwatch", "patch_shared_memory"))
    importhook.when_imported("multiprocessing.synchronize", _later("shmwatch", "patch_semlock"))  # leaks named
    importhook.when_imported("threading", name_python_threads)
    importhook.when_imported("multiprocessing.context", _later("mpwrap", "patch_context"))
    importhook.when_imported("multiprocessing.process", _later("mpwrap", "patch_process"))
    importhook.when_imported("multiprocessing.pool", _later("mpwrap", "patch_pool"))
    importhook.when_imported("multiprocessing.spawn", _later("mpwrap", "patch_spawn"))
    importhook.when_imported("multiprocessing.spawn", _later("reimport", "patch"))   # __main__'s re-import timed
    if os.environ.get("GPUSCOPE_FORKSERVER_PRELOAD"):   # asked for: the forkserver imports these once
        importhook.when_imported("multiprocessing.forkserver", _later("reimport", "preload"))
    importhook.when_imported("concurrent.futures.process", _later("mpwrap", "patch_executor"))
    importhook.when_imported("nvtx", _later("nvtxwrap", "install"))
    importhook.when_imported("ray", _later("raywrap", "install"))                     # Ray tasks, actors
    if os.environ.get("GPUSCOPE_TORCH_PROFILE"):   # --torch-profile: torch.profiler in torch processes
        importhook.when_imported("torch", _later("torchprof", "on_torch"))
    if os.environ.get("GPUSCOPE_ANNOTATE", "").strip():   # the patterns' module only for --annotate
        _install_annotate(role, atexit)


def _later(name, func="patch"):
    """A post-import callback that imports ``gpuscope.inject.<name>`` only when it fires."""
    def call(module):
        full = __package__ + "." + name
        wrapper = sys.modules.get(full)   # loaded at start for its role (activate)
        if wrapper is None:   # the builtin __import__: importlib (and the warnings it imports)
            __import__(full)  # lean: not in a program that would not have imported them
            wrapper = sys.modules[full]
        getattr(wrapper, func)(module)
    return call


def _loaded(module):
    return sys.modules.get("%s.%s" % (__package__, module))


def _install_annotate(role, atexit):
    """--annotate: modules imported later, those already imported, the script's own functions."""
    from . import annotate_patterns

    if not annotate_patterns.PATTERNS:
        return
    from . import maintrace, nvtxwrap  # noqa: F401 - the wrappers record through nvtxwrap (found in sys.modules)

    importhook.when_imported_matching(annotate_patterns.wants, annotate_patterns.apply)
    annotate_patterns.apply_to_imported()
    if role == "main" or role.startswith("rank "):
        maintrace.start()
    atexit.register(annotate_patterns.report_missed)  # runs before _at_exit (last in, first out)
