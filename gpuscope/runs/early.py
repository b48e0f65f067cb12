"""Start the program of a plain ``gpuscope run SCRIPT [ARGS]`` before gpuscope's own imports.

Such a run needs none of RunSpec's options beyond the start method, so its program can start as
soon as its spec is validated: before gpuscope imports the supervisor, the recorders, the
telemetry and the store, which then load while the program starts. :func:`start` validates the
RunSpec, reserves the run folder and starts the program as :class:`gpuscope.runs.supervisor.Run`
does (the same argv, environment, session and output: ``subprocess.Popen`` with
``start_new_session``); ``Run(spec, early=...)`` adopts it. Anything unusual (a failed check, a
program that cannot start) gives None and leaves nothing behind: the usual path runs and words it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import NamedTuple

from gpuscope import rundir as layout
from gpuscope.procs.existing import Existing
from gpuscope.runs.launcher import Command, build_command
from gpuscope.runs.pipes import open_output
from gpuscope.spec import RunSpec


class EarlyStart(NamedTuple):
    """A program started by :func:`start`, until ``Run`` adopts it (or :meth:`abandon` ends it).
    ``run_dir`` is a string (``Run`` makes it a ``Path``)."""

    validated: RunSpec
    run_id: str
    run_dir: str
    command: Command
    proc: subprocess.Popen[bytes]
    read_out: int
    started_ns: int
    existing: Existing

    def spec(self, spec: RunSpec) -> RunSpec:
        """``spec`` (the command line's, which :func:`start` was given) as ``spec.validated()`` gives it."""
        return self.validated

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


def eligible(spec: RunSpec) -> bool:
    """``spec`` asks for a script run by this python with RunSpec's defaults but its arguments and
    start method (what :func:`start` can check and start by itself)."""
    return bool(spec.script) and spec._replace(script="", args=(), start_method="default") == RunSpec("")


def start(spec: RunSpec, *, live: bool) -> EarlyStart | None:
    """Validate, reserve the run folder and start the program; None (nothing left behind) when
    any step does not go as usual."""
    try:
        validated = spec.validated()
    except Exception:  # noqa: BLE001 - the usual path says what is wrong
        return None
    run_dir: str | None = None
    try:   # as Run: the data folder's walk to make older runs private waits for the program
        run_id, run_dir = layout.reserve_run_dir(tighten=False)
        layout.create_run_folder(run_id, tighten=False)
        command = build_command(validated, run_id, run_dir)
    except Exception:  # noqa: BLE001
        _remove(run_dir)
        return None
    started = _spawn(command, live)
    if started is None:   # Run starts it again and words the error
        _remove(run_dir)
        return None
    proc, read_out, existing = started
    return EarlyStart(validated, run_id, run_dir, command, proc, read_out, time.time_ns(), existing)


def _spawn(command: Command, live: bool) -> tuple[subprocess.Popen[bytes], int, Existing] | None:
    """As ``Run._spawn``: (the program, the fd its stdout is read from, the processes before it),
    or None with nothing left open or running."""
    child_out, read_out = open_output(live)
    existing = Existing()
    try:
        proc = subprocess.Popen(command.argv, env=command.env, cwd=command.cwd, start_new_session=True,
                                stdout=child_out, stderr=subprocess.PIPE)
    except (OSError, ValueError, subprocess.SubprocessError):
        os.close(read_out)
        return None
    finally:
        os.close(child_out)
    return proc, read_out, existing


def _remove(run_dir: str | None) -> None:
    """The run folder reserved for a program that did not start (still empty)."""
    for path in ((os.path.join(run_dir, layout.EVENTS), run_dir) if run_dir is not None else ()):
        try:
            os.rmdir(path)
        except OSError:
            pass

