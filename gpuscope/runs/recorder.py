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
   ends a moment later; a program's own children may take longer): begin what does not need them
   gone, while ``Run`` waits for them (the last telemetry sample, the event logs read ahead).
6. ``program_ended(ctx)``: the program's processes are gone (or stopped); heavy work may follow.
7. ``finish(outcome)``: add to the run's result (notes, processes, findings, files); may take long
   (nsys import and export) and must honour ``outcome.cancelled`` when set (a Stop while finishing:
   end any tool started, keep what was recorded). Called in the recorders' order (event logs first,
   so ``outcome.events`` and ``outcome.processes`` are filled for the others), and also when the
   program could not be started (``outcome.launched`` is False) so that a recorder can release
   what ``prepare`` took. Recorders contribute through ``Outcome``'s typed fields; ``Run`` makes
   the run's record (:class:`gpuscope.runrecord.RunRecord`) from them.

The run's event logs are read by one reader, ``ctx.events`` (:class:`gpuscope.trace.events.RunEvents`,
shared by every recorder): ``ctx.events.on_first_exit(callback)`` tells of the program's end as
its first process writes its exit record (under nsys, before nsys has finished).

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
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuscope.paths import as_path

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable, Protocol

    from gpuscope.finding import Finding
    from gpuscope.runrecord.model import NsysSummary, TorchTraceFile
    from gpuscope.trace.process_row import SampledProcess
    from gpuscope.trace.events import RunEvents
    from gpuscope.trace.process_row import ProcessRow

    from gpuscope.procs.existing import Existing
    from gpuscope.procs.read import ProcInfo
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


@dataclass
class Launch(InRunFolder):
    """What starts the run's first process; recorders edit it in ``prepare``."""

    spec: RunSpec
    run_id: str
    run_folder: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    notes: list[str] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)
    progress: Callable[[str], None] = _no_progress
    stop_requested: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.run_folder = os.fspath(self.run_folder)   # a Path is taken too


@dataclass
class RunContext(InRunFolder):
    """What recorders may read about the running program."""

    spec: RunSpec
    run_id: str
    run_folder: str
    pid: int
    started_ns: int
    stop_requested: threading.Event
    notes: list[str] = field(default_factory=list)        # the run's notes (shared, append only)
    progress: Callable[[str], None] = _no_progress
    existing: Existing | None = None    # the host's processes just before the program
    events: RunEvents | None = None     # the run's one event-log reader (gpuscope.trace.events)

    def __post_init__(self) -> None:
        self.run_folder = os.fspath(self.run_folder)

    def main_running(self) -> bool:
        """Whether the run's first process (``pid``) has not exited yet. A short program may end
        while gpuscope still loads what records it: a recorder then skips what only serves a running
        program. Looked at without reaping it (``Run.wait`` does); True for a pid not ours to wait for."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return True


@dataclass
class Outcome:
    """The run's result while recorders finish it; each recorder fills the fields it owns."""

    exit: ExitStatus
    stopped: bool
    ended_ns: int
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    failed: bool = False          # a recorder failed in a way that fails the run
    launched: bool = True         # False: the program never started (prepare's undo only)
    progress: Callable[[str], None] = _no_progress
    cancelled: threading.Event = field(default_factory=threading.Event)
    # what the recorders contribute, in their finishing order (event logs first):
    events: RunEvents | None = None       # the run's event logs, read once (the event-log recorder)
    processes: list[ProcessRow] = field(default_factory=list)      # one row per process (event logs)
    sampled: list[SampledProcess] = field(default_factory=list)    # what the sampler saw (telemetry)
    nsys: NsysSummary | None = None       # the nsys recording's result (nsys)
    findings: list[Finding] = field(default_factory=list)          # the run's findings (findings)
    torch_traces: list[TorchTraceFile] = field(default_factory=list)   # --torch-profile's traces


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
