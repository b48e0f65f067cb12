"""Start the program of a plain ``gpuscope run SCRIPT [ARGS]`` before gpuscope's own imports (issue 14.4).

Such a run needs none of RunSpec's options, so its program can start as soon as its script and
interpreter are checked: before gpuscope imports ``dataclasses`` (``inspect``, ``ast``), the
supervisor, the recorders and the telemetry (~30 ms of a 2-core runner's CPU), which then load
while the program starts. :func:`start` checks what :meth:`gpuscope.spec.RunSpec.validated` checks
for such a run (the same functions, in the same order), reserves the run folder and starts the
program as :class:`gpuscope.runs.supervisor.Run` does (the same argv, environment, session and
output); ``Run(spec, early=...)`` adopts it. Anything unusual (a failed check, a program that cannot
start) gives None and leaves nothing behind: the usual path runs and says it as before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope import rundir as layout
from gpuscope.runs.launcher import Command, build_command
from gpuscope.runs.output import open_output
from gpuscope.spec_checks import START_METHODS, checked_python, checked_script

if TYPE_CHECKING:
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


class EarlyStart:
    """A program started by :func:`start`, until ``Run`` adopts it (or :meth:`abandon` ends it)."""

    def __init__(self, fields: _Fields, run_id: str, run_dir: Path, command: Command,
                 proc: subprocess.Popen[bytes], read_out: int, started_ns: int) -> None:
        self.fields, self.run_id, self.run_dir, self.command = fields, run_id, run_dir, command
        self.proc, self.read_out, self.started_ns = proc, read_out, started_ns

    def spec(self, spec: RunSpec) -> RunSpec:
        """``spec`` (the command line's) as ``spec.validated()`` gives it: the checks were done here."""
        from dataclasses import replace

        f = self.fields
        return replace(spec, script=f.script, cwd=f.cwd, python=f.python, args=tuple(spec.args),
                       annotate=tuple(spec.annotate), nproc=int(spec.nproc))

    def abandon(self) -> None:
        """gpuscope failed before it adopted the program: end its whole session, leave nothing behind."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        for close in (lambda: os.close(self.read_out), lambda: self.proc.stderr and self.proc.stderr.close()):
            try:
                close()
            except OSError:
                pass


def eligible(args: Any) -> bool:
    """``gpuscope run``'s arguments ask for a script run by this python with RunSpec's defaults
    (what :func:`start` can check and start by itself)."""
    return (bool(args.script) and args.module is None and args.launcher == "python" and args.python is None
            and args.cwd is None and not args.annotate and not args.nsys and args.nproc == 1
            and args.interval == 0.1 and args.nnodes is None and args.node_rank is None
            and args.rdzv_endpoint is None and args.rdzv_id is None and args.rdzv_timeout is None
            and args.job_dir is None)


def start(script: str, args: list[str], start_method: str, *, live: bool, stdin: Any = None) -> EarlyStart | None:
    """Check, reserve the run folder and start the program; None (nothing left behind) when any
    step does not go as usual."""
    try:   # RunSpec.validated's checks for this run, in its order
        if start_method not in START_METHODS:
            return None
        cwd = Path.cwd()
        if not cwd.is_dir():
            return None
        cwd = cwd.resolve()
        python = checked_python(None)
        fields = _Fields(str(checked_script(script, cwd)), tuple(args), str(cwd), python, start_method)
    except Exception:  # noqa: BLE001 - the usual path says what is wrong
        return None
    run_dir: Path | None = None
    try:   # as Run: layout.new_run_id, then create_run_dir (the data folder's walk waits for the program)
        run_id, run_dir = layout.reserve_run_dir(tighten=False)
        layout.create_run_dir(run_id, tighten=False)
        command = build_command(fields, run_id, run_dir)    # type: ignore[arg-type]
        child_out, read_out = open_output(live)
    except Exception:  # noqa: BLE001
        _remove(run_dir)
        return None
    try:   # as Run._spawn
        proc = subprocess.Popen(command.argv, env=command.env, cwd=command.cwd, start_new_session=True,
                                stdin=stdin, stdout=child_out, stderr=subprocess.PIPE)
        started_ns = time.time_ns()
    except Exception:  # noqa: BLE001 - Run starts it again and words the error
        os.close(read_out)
        _remove(run_dir)
        return None
    finally:
        os.close(child_out)
    return EarlyStart(fields, run_id, run_dir, command, proc, read_out, started_ns)


def _remove(run_dir: Path | None) -> None:
    """The run folder reserved for a program that did not start (still empty)."""
    for path in ((run_dir / layout.EVENTS, run_dir) if run_dir is not None else ()):
        try:
            path.rmdir()
        except OSError:
            pass
