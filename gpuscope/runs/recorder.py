"""The one lifecycle of everything that records a run (telemetry, event logs, nsys, findings, …).

``Run`` (``gpuscope.runs.supervisor``) only sequences recorders; a new kind of recording is a new
module with a class that implements :class:`Recorder`, not new branches in ``Run``. The order of
calls, for every recorder of a run:

1. ``prepare(launch)``: contribute to the argv and environment of the run's first process (and to
   its notes) before anything starts. A recorder that wraps the command (nsys) replaces
   ``launch.argv``. A :class:`gpuscope.errors.UserError` raised here ends the run before it starts
   (no nsys, another recording held the machine too long); any other exception becomes a note.
2. ``started(ctx)``: the program's first process exists (``ctx.pid``); the program already runs,
   so a recorder's imports and set-up here cost the user nothing before the program starts.
3. ``on_batch(batch)``: one telemetry batch per sampler tick, on the sampler's thread (keep it cheap).
4. ``on_output(stream, chunk)``: the program's output as it arrives, on the output thread.
5. ``main_exited(ctx)``: the run's first process has ended; others may still be ending
   (multiprocessing's resource tracker reads the end of its pipe as the main process exits, and
   ends a few ms later; a program's own children may take longer): begin what does not need them
   gone, while ``Run`` waits for them (the last telemetry sample, the event logs read ahead).
6. ``program_ended(ctx)``: the program's processes are gone (or stopped); heavy work may follow.
7. ``finish(outcome)``: add to the run's result (notes, processes, findings, files); may take long
   (nsys import and export) and must honour ``outcome.cancelled`` when set (a Stop while finishing:
   end any tool started, keep what was recorded). Called in the recorders' order (event logs first,
   so ``outcome.processes`` is filled for the others), and also when the program could not be
   started (``outcome.launched`` is False) so that a recorder can release what ``prepare`` took.

Two optional hooks serve stopping: ``own_processes(tree)`` names the processes of the tree that
belong to the recorder, not to the program (nsys and its launcher): a first Stop ends only the
program's processes and lets the recorder finish its work; a second Stop calls ``abandon()``,
which gives up what is being recorded now (it must say so in the run's notes).

Every method has a do-nothing default in :class:`BaseRecorder`; an exception in a recorder (other
than ``UserError`` in ``prepare``) is recorded as a note and never stops the run or the other
recorders. The run's supervisor calls ``on_batch`` / ``on_output`` only on recorders that override
them.
"""

from __future__ import annotations

import os

from gpuscope import threads
from gpuscope.paths import as_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable, Protocol

    from gpuscope.proclist import Existing
    from gpuscope.runs.procscan import ProcInfo
    from gpuscope.status import ExitStatus
    from gpuscope.spec import RunSpec
    from gpuscope.telemetry.batch import SampleBatch


def _no_progress(_message: str) -> None:
    pass


class InRunFolder:
    """``run_folder``: the run's folder as a string, which the run path uses (``pathlib`` is not
    imported by ``gpuscope run``: paths.as_path); ``run_dir``: the same as a ``Path``, made when asked."""

    run_folder: str

    @property
    def run_dir(self) -> Path:
        return as_path(self.run_folder)


# Launch, RunContext and Outcome are plain classes (a dataclass costs ~0.5 ms to create, at every
# `gpuscope run`): the same fields, in the same order, with the same defaults.
class Launch(InRunFolder):
    """What starts the run's first process; recorders edit it in ``prepare``."""

    def __init__(self, spec: RunSpec, run_id: str, run_dir: str | os.PathLike[str], argv: list[str],
                 env: dict[str, str], cwd: str, notes: list[str] | None = None,
                 versions: dict[str, Any] | None = None, progress: Callable[[str], None] = _no_progress,
                 stop_requested: threads.Event | None = None) -> None:
        self.spec, self.run_id, self.argv, self.env, self.cwd = spec, run_id, argv, env, cwd
        self.run_folder = os.fspath(run_dir)
        self.notes: list[str] = [] if notes is None else notes
        self.versions: dict[str, Any] = {} if versions is None else versions
        self.progress = progress
        self.stop_requested = threads.Event() if stop_requested is None else stop_requested


class RunContext(InRunFolder):
    """What recorders may read about the running program."""

    def __init__(self, spec: RunSpec, run_id: str, run_dir: str | os.PathLike[str], pid: int, started_ns: int,
                 stop_requested: threads.Event, notes: list[str] | None = None,
                 progress: Callable[[str], None] = _no_progress, existing: Existing | None = None) -> None:
        self.spec, self.run_id, self.pid, self.started_ns = spec, run_id, pid, started_ns
        self.run_folder = os.fspath(run_dir)
        self.existing = existing    # gpuscope.proclist.Existing: the host's processes before the program
        self.stop_requested = stop_requested
        self.notes: list[str] = [] if notes is None else notes       # the run's notes (shared, append only)
        self.progress = progress


class Outcome:
    """The run's result while recorders finish it; each recorder adds what it owns."""

    def __init__(self, exit: ExitStatus, stopped: bool, ended_ns: int, notes: list[str] | None = None,
                 error: str | None = None, failed: bool = False, launched: bool = True,
                 processes: list[dict[str, Any]] | None = None, progress: Callable[[str], None] = _no_progress,
                 cancelled: threads.Event | None = None, extra: dict[str, Any] | None = None) -> None:
        self.exit, self.stopped, self.ended_ns = exit, stopped, ended_ns
        self.notes: list[str] = [] if notes is None else notes
        self.error = error
        self.failed = failed          # a recorder failed in a way that fails the run
        self.launched = launched      # False: the program never started (prepare's undo only)
        self.processes: list[dict[str, Any]] = [] if processes is None else processes  # per-process rows (event logs first)
        self.progress = progress
        self.cancelled = threads.Event() if cancelled is None else cancelled
        self.extra: dict[str, Any] = {} if extra is None else extra   # e.g. "nsys": NsysResult, "events": the event logs


if TYPE_CHECKING:   # the interface every recorder implements (type checkers only: BaseRecorder is its runtime form)
    class Recorder(Protocol):
        name: str

        def prepare(self, launch: Launch) -> None: ...

        def started(self, ctx: RunContext) -> None: ...

        def on_batch(self, batch: "SampleBatch") -> None: ...

        def on_output(self, stream: str, chunk: bytes) -> None: ...

        def main_exited(self, ctx: RunContext) -> None: ...

        def program_ended(self, ctx: RunContext) -> None: ...

        def finish(self, outcome: Outcome) -> None: ...

        def own_processes(self, tree: dict[int, "ProcInfo"]) -> set[int]: ...

        def abandon(self) -> None: ...


class BaseRecorder:
    """Do-nothing defaults: subclass and override what the recorder needs."""

    name = "recorder"

    def prepare(self, launch: Launch) -> None:
        pass

    def started(self, ctx: RunContext) -> None:
        pass

    def on_batch(self, batch: "SampleBatch") -> None:
        pass

    def on_output(self, stream: str, chunk: bytes) -> None:
        pass

    def main_exited(self, ctx: RunContext) -> None:
        pass

    def program_ended(self, ctx: RunContext) -> None:
        pass

    def finish(self, outcome: Outcome) -> None:
        pass

    def own_processes(self, tree: dict[int, "ProcInfo"]) -> set[int]:
        return set()

    def abandon(self) -> None:
        pass


def overrides(recorder: object, method: str) -> bool:
    """Whether ``recorder`` implements ``method`` itself (not the do-nothing default)."""
    default = getattr(BaseRecorder, method, None)
    return getattr(type(recorder), method, None) is not default
