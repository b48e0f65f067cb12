"""The one lifecycle of everything that records a run (telemetry, event logs, nsys, findings, …).

``Run`` (``gpuscope.runs.supervisor``) only sequences recorders; a new kind of recording is a new
module with a class that implements :class:`Recorder`, not new branches in ``Run``. The order of
calls, for every recorder of a run:

1. ``prepare(launch)``: contribute to the argv and environment of the run's first process (and to
   its notes) before anything starts. A recorder that wraps the command (nsys) replaces
   ``launch.argv``.
2. ``started(ctx)``: the program's first process exists (``ctx.pid``).
3. ``on_batch(batch)``: one telemetry batch per sampler tick, on the sampler's thread (keep it cheap).
4. ``on_output(stream, chunk)``: the program's output as it arrives, on the output thread.
5. ``program_ended(ctx)``: the program's processes are gone (or stopped); heavy work may follow.
6. ``finish(outcome)``: add to the run's result (notes, processes, findings, files); may take long
   (nsys import and export) and must honour ``outcome.cancelled`` when set.

Every method has a do-nothing default in :class:`BaseRecorder`; an exception in a recorder is
recorded as a note and never stops the run or the other recorders.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpuscope.runs.status import ExitStatus
    from gpuscope.spec import RunSpec
    from gpuscope.telemetry.batch import SampleBatch


@dataclass
class Launch:
    """What starts the run's first process; recorders edit it in ``prepare``."""

    spec: "RunSpec"
    run_id: str
    run_dir: Path
    argv: list[str]
    env: dict[str, str]
    cwd: str
    notes: list[str] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunContext:
    """What recorders may read about the running program."""

    spec: "RunSpec"
    run_id: str
    run_dir: Path
    pid: int
    started_ns: int
    stop_requested: threading.Event


@dataclass
class Outcome:
    """The run's result while recorders finish it; each recorder adds what it owns."""

    exit: "ExitStatus"
    stopped: bool
    ended_ns: int
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    failed: bool = False                      # a recorder failed in a way that fails the run
    cancelled: threading.Event = field(default_factory=threading.Event)
    extra: dict[str, Any] = field(default_factory=dict)   # e.g. "nsys": NsysResult


class Recorder(Protocol):
    name: str

    def prepare(self, launch: Launch) -> None: ...

    def started(self, ctx: RunContext) -> None: ...

    def on_batch(self, batch: "SampleBatch") -> None: ...

    def on_output(self, stream: str, chunk: bytes) -> None: ...

    def program_ended(self, ctx: RunContext) -> None: ...

    def finish(self, outcome: Outcome) -> None: ...


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

    def program_ended(self, ctx: RunContext) -> None:
        pass

    def finish(self, outcome: Outcome) -> None:
        pass
