"""Start the program of a plain ``gpuscope run SCRIPT [ARGS]`` before gpuscope's own imports (issue 14.4).

Such a run needs none of RunSpec's options, so its program can start as soon as its script and
interpreter are checked: before gpuscope imports the supervisor, the recorders, the telemetry and
the store, which then load while the program starts. :func:`start` checks what
:meth:`gpuscope.spec.RunSpec.validated` checks for such a run (the same functions, in the same
order), reserves the run folder and starts the program as :class:`gpuscope.runs.supervisor.Run`
does (the same argv, environment, session and output); ``Run(spec, early=...)`` adopts it.
Anything unusual (a failed check, a program that cannot start) gives None and leaves nothing
behind: the usual path runs and says it as before.

Everything here runs before the program starts, so it imports only what a bare interpreter has
already loaded (``os``, ``_signal``, ``_thread``) and gpuscope's lean modules: not ``subprocess``,
``pathlib``, ``typing`` nor ``re`` (each 5-25 ms on a 2-core runner, tests/runs/test_early_start.py
checks the list). The program is started by fork and exec, as ``subprocess.Popen`` would start it
here (new session, signals Python ignores set back to default, inherited descriptors above 2
closed: :func:`_spawn`); :class:`Child` is what ``Run`` uses of a ``Popen``.
"""

# Loaded before `gpuscope run` starts its program: no `from __future__ import annotations`, which
# imports __future__ (~0.5 ms there); annotations naming what only type checkers import are strings.

import _signal   # the C module behind `signal` (which imports enum): loaded by every interpreter
import _thread
import os
import time

from gpuscope import rundir as layout
from gpuscope.proclist import Existing
from gpuscope.runs.launcher import Command, build_command
from gpuscope.runs.pipes import open_output, widen_pipe
from gpuscope.spec_checks import START_METHODS, checked_python, checked_script

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuscope.spec import RunSpec


class _Fields:
    """What :func:`gpuscope.runs.launcher.build_command` reads of a validated RunSpec, for a script run
    by python with RunSpec's defaults (``EarlyStart.spec`` is that RunSpec)."""

    launcher = "python"
    module = None
    is_module = False
    env: tuple[tuple[str, str], ...] = ()
    annotate: tuple[str, ...] = ()
    sample_interval_s = 0.1
    multinode = False

    def __init__(self, script: str, args: tuple[str, ...], cwd: str, python: str, start_method: str) -> None:
        self.script, self.args, self.cwd, self.python, self.start_method = script, args, cwd, python, start_method

    @property
    def target_args(self) -> list[str]:
        return [self.script]


class Child:
    """The program as :func:`_spawn` started it: what ``Run`` uses of a ``subprocess.Popen``
    (``pid``, ``stderr``, ``poll``, ``wait``, ``returncode``). As ``Popen``, one thread reaps it
    (``wait`` holds a lock; ``poll`` from another thread meanwhile answers None)."""

    def __init__(self, pid: int, stderr_fd: int) -> None:
        self.pid = pid
        self.stderr = open(stderr_fd, "rb", buffering=0)
        self.returncode: int | None = None
        self._lock = _thread.allocate_lock()

    def poll(self) -> int | None:
        if self.returncode is None and self._lock.acquire(False):
            try:
                if self.returncode is None:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
            finally:
                self._lock.release()
        return self.returncode

    def wait(self) -> int:
        with self._lock:
            if self.returncode is None:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class EarlyStart:
    """A program started by :func:`start`, until ``Run`` adopts it (or :meth:`abandon` ends it).
    ``run_dir`` is a string (``Run`` makes it a ``Path``)."""

    def __init__(self, fields: "_Fields", run_id: str, run_dir: str, command: "Command",
                 proc: "Child", read_out: int, started_ns: int, existing: "Existing") -> None:
        self.fields, self.run_id, self.run_dir, self.command = fields, run_id, run_dir, command
        self.proc, self.read_out, self.started_ns = proc, read_out, started_ns
        self.existing = existing

    def spec(self, spec: "RunSpec") -> "RunSpec":
        """``spec`` (the command line's) as ``spec.validated()`` gives it: the checks were done here."""
        from gpuscope.record import replace

        f = self.fields
        return replace(spec, script=f.script, cwd=f.cwd, python=f.python, args=tuple(spec.args),
                       annotate=tuple(spec.annotate), nproc=int(spec.nproc))

    def abandon(self) -> None:
        """gpuscope failed before it adopted the program: end its whole session, leave nothing behind."""
        try:
            os.killpg(self.proc.pid, _signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        for close in (lambda: os.close(self.read_out), lambda: self.proc.stderr and self.proc.stderr.close()):
            try:
                close()
            except OSError:
                pass


def eligible(args: "Any") -> bool:
    """``gpuscope run``'s arguments ask for a script run by this python with RunSpec's defaults
    (what :func:`start` can check and start by itself)."""
    return (bool(args.script) and args.module is None and args.launcher == "python" and args.python is None
            and args.cwd is None and not args.annotate and not args.nsys and args.nproc == 1
            and args.interval == 0.1 and args.nnodes is None and args.node_rank is None
            and args.rdzv_endpoint is None and args.rdzv_id is None and args.rdzv_timeout is None
            and args.job_dir is None)


def start(script: str, args: list[str], start_method: str, *, live: bool, stdin: "Any" = None) -> "EarlyStart | None":
    """Check, reserve the run folder and start the program; None (nothing left behind) when any
    step does not go as usual."""
    try:   # RunSpec.validated's checks for this run, in its order
        if start_method not in START_METHODS:
            return None
        cwd = os.getcwd()
        if not os.path.isdir(cwd):
            return None
        cwd = os.path.realpath(cwd)
        python = checked_python(None)
        fields = _Fields(checked_script(script, cwd), tuple(args), cwd, python, start_method)
    except Exception:  # noqa: BLE001 - the usual path says what is wrong
        return None
    run_dir: str | None = None
    try:   # as Run: layout.new_run_id, then create_run_dir (the data folder's walk waits for the program)
        run_id, run_dir = layout.reserve_run_dir(tighten=False)
        layout.create_run_folder(run_id, tighten=False)
        command = build_command(fields, run_id, run_dir)    # type: ignore[arg-type]
    except Exception:  # noqa: BLE001
        _remove(run_dir)
        return None
    child = _spawn(command, live, stdin)
    if child is None:   # Run starts it again and words the error
        _remove(run_dir)
        return None
    proc, read_out, existing = child
    return EarlyStart(fields, run_id, run_dir, command, proc, read_out, time.time_ns(), existing)


def _spawn(command: "Command", live: bool, stdin: "Any") -> "tuple[Child, int, Existing] | None":
    """As ``Run._spawn``'s ``Popen(argv, env=..., cwd=..., start_new_session=True, stdin=None,
    stdout=<pty or pipe>, stderr=PIPE)`` with Popen's defaults (``close_fds``, ``restore_signals``),
    done as Popen does it: fork (``gpuscope run`` has no other thread yet; between fork and exec the
    child only calls os-level functions, as Popen's), then in the child its folder, a new session, the
    two descriptors on 1 and 2, inherited descriptors above 2 closed, SIGPIPE and SIGXFSZ (which
    Python ignores) back to default, exec. (``os.posix_spawn`` would be shorter, but glibc's leaves
    its two internal signals ignored in the program.) While the child execs, the parent lists the
    processes before the program (:class:`Existing`, as ``Run._spawn`` does before its Popen: ~0.5
    ms, now beside the exec instead of before the fork), and widens the stdout pipe to 1 MiB (after
    the fork: ``fcntl``'s import, ~0.3 ms). (the program, the fd its stdout is read
    from, the processes before it), or None with nothing left open or running."""
    if stdin is not None:
        return None
    opened: list[int] = []
    try:
        child_out, read_out = open_output(live, widen=False)   # widened while the child execs
        opened += [child_out, read_out]
        err_read, err_write = os.pipe()
        opened += [err_read, err_write]
        failed_read, failed_write = os.pipe()    # the child's exec error, if any; closed by its exec
        opened += [failed_read, failed_write]
        if min(opened) <= 2:   # a standard stream was closed: Popen knows how to shuffle them
            raise OSError("low descriptors")
        inherited = _inherited_fds()
        argv, env, cwd = command.argv, command.env, command.cwd
        pid = os.fork()
        if pid == 0:   # the child: nothing here may return into gpuscope
            try:
                os.chdir(cwd)
                os.setsid()
                os.dup2(child_out, 1)
                os.dup2(err_write, 2)
                for fd in inherited:
                    os.close(fd)
                _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
                _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
                os.execve(argv[0], argv, env)
            except BaseException as exc:  # noqa: BLE001
                os.write(failed_write, str(getattr(exc, "errno", None) or -1).encode())
            finally:
                os._exit(127)
    except Exception:  # noqa: BLE001 - not started: the usual path starts it
        for fd in opened:
            os.close(fd)
        return None
    for fd in (child_out, err_write, failed_write):
        os.close(fd)
    existing = Existing(program=pid)
    widen_pipe(read_out)   # a pty refuses: left as it is
    failed = os.read(failed_read, 32)
    os.close(failed_read)
    child = Child(pid, err_read)
    if failed:   # did not exec: reaped here, and the usual path starts it again and words the error
        child.wait()
        child.stderr.close()
        os.close(read_out)
        return None
    return child, read_out, existing


def _inherited_fds() -> list[int]:
    """Descriptors above 2 a child would inherit (gpuscope's own are close-on-exec; these came
    from whoever started gpuscope): Popen's close_fds closes them, and so does the spawn."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    out.append(fd)
            except OSError:   # the listing's own descriptor, closed by now
                pass
    return out


def _remove(run_dir: str | None) -> None:
    """The run folder reserved for a program that did not start (still empty)."""
    for path in ((os.path.join(run_dir, layout.EVENTS), run_dir) if run_dir is not None else ()):
        try:
            os.rmdir(path)
        except OSError:
            pass
