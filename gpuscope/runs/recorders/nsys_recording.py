"""Record the run under ``nsys profile``: wrap the command, watch for a hung nsys, import and export.

Stopping (docs/NSYS-RECORDING.md): nsys and its launcher are this recorder's processes
(:meth:`NsysRecorder.own_processes`), so a first Stop ends only the program's processes; nsys sees
its target end and writes its report as after a normal exit, which ``finish`` then imports and
exports. A second Stop (:meth:`NsysRecorder.abandon`) kills nsys and its agent and says the report
was abandoned. A Stop while importing or exporting ends that tool and keeps what was recorded.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from gpuscope.errors import UserError
from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext

EXIT_HANG_S = 60.0  # a process past its exit handlers that still lives this long under nsys is hung
WATCH_S = 0.5
ABANDONED = "the nsys report was abandoned (Stop pressed twice); the program's own event logs are kept"


class NsysRecorder(BaseRecorder):
    """The nsys session of one run (``gpuscope.nsys.record``) behind the recorder lifecycle."""

    name = "nsys"

    def __init__(self) -> None:
        self.session: Any = None        # gpuscope.nsys.record.NsysSession
        self._lock: Any = None          # gpuscope.nsys.lock.NsysLock, held from prepare to finish
        self._timeout_s = 120.0
        self._hang: str | None = None
        self._abandoned = False
        self._done = threading.Event()
        self._watch: threading.Thread | None = None

    # -- before the program ------------------------------------------------------------------
    def prepare(self, launch: Launch) -> None:
        from gpuscope.nsys import record

        spec = launch.spec
        self._timeout_s = spec.nsys.timeout_s
        # Pool workers ended by SIGTERM, and fork children (which end with os._exit), exit through
        # C exit() so nsys flushes their ranges (gpuscope/inject/mpwrap.py).
        launch.env["GPUSCOPE_UNDER_NSYS"] = "1"
        fork = spec.nsys.fork_tracing(spec.start_method)
        if fork:
            launch.env["GPUSCOPE_NSYS_FORK"] = "1"
        self.session = record.prepare(spec, launch.run_dir, launch.argv, launch.env)
        launch.argv, launch.env = self.session.argv, self.session.env
        launch.notes.extend(self.session.notes)
        launch.versions.update(self.session.versions())
        self._take_lock(launch)

    def _take_lock(self, launch: Launch) -> None:
        from gpuscope.nsys.lock import NsysLock

        lock = NsysLock()
        if lock.acquire(self._timeout_s, launch.progress, launch.stop_requested.is_set):
            self._lock = lock
            return
        if launch.stop_requested.is_set():
            raise UserError("stopped while waiting for another nsys recording to finish")
        raise UserError(f"another nsys recording kept this machine busy for {self._timeout_s:.0f} s; "
                        "try again when it has finished")

    # -- while it runs -----------------------------------------------------------------------
    def started(self, ctx: RunContext) -> None:
        self.session.started(ctx.pid)
        self._watch = threading.Thread(target=self._watch_for_hang, args=(ctx,), name="gpuscope-nsys-watch",
                                       daemon=True)
        self._watch.start()

    def own_processes(self, tree: dict[int, Any]) -> set[int]:
        """``nsys profile``, ``nsys-launcher``, ``nsys-tee`` (the agent is outside the run's tree)."""
        pid = self.session.pid if self.session is not None else None
        return {p for p, info in tree.items() if p == pid or info.comm.startswith("nsys")}

    def abandon(self) -> None:
        if self.session is None or self._abandoned:
            return
        self._abandoned = True
        self.session.kill()

    def _watch_for_hang(self, ctx: RunContext) -> None:
        """If ``nsys profile`` outlives the program by more than the nsys timeout (it can hang in
        "Generating ...qdstrm"), or the program's first process is stuck past its exit handlers
        (seen with 2024.2: nsys's exit handlers in a futex) for a minute, stop nsys with its agent."""
        from gpuscope.procs.membership import run_processes

        gone_at: float | None = None
        while not self._done.wait(WATCH_S):
            tree = run_processes(ctx.pid, ctx.run_id)
            program = set(tree) - self.own_processes(tree)
            exited = self._program_finished(ctx)   # read every time: the run's reader tells of the end
            finished = bool(program) and exited
            if program and not finished:
                gone_at = None
                continue
            gone_at = gone_at or time.monotonic()
            bound = min(self._timeout_s, EXIT_HANG_S) if finished else self._timeout_s
            if time.monotonic() - gone_at > bound:
                ctx.progress(f"nsys: still busy {bound:.0f} s after the program ended; stopping it")
                self._hang = (f"nsys did not finish within {bound:.0f} s after the program ended (hung); "
                              "it was stopped with its agent and the program's processes")
                self.session.kill()
                return

    def _program_finished(self, ctx: RunContext) -> bool:
        """Whether the run's first program process (main, or torchrun's agent) has run its exit
        handlers (the X line of its event log, as the run's reader reads it)."""
        if ctx.events is None:
            return False
        ctx.events.refresh(ranges=False)
        return ctx.events.first_exited

    def program_ended(self, ctx: RunContext) -> None:
        self._done.set()
        if self._watch is not None:
            self._watch.join()

    # -- after -------------------------------------------------------------------------------
    def finish(self, outcome: Outcome) -> None:
        try:
            if outcome.launched:
                self._finish(outcome)
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _finish(self, outcome: Outcome) -> None:
        if self._hang is not None:
            outcome.error, outcome.failed = f"nsys: {self._hang}", True
            return
        if self._abandoned:
            self.session.kill()  # whatever of nsys was still alive after the program ended
            outcome.notes.append(ABANDONED)
            outcome.error = f"nsys: {ABANDONED}"
            return
        result = self.session.finish(outcome.progress, self._timeout_s, cancelled=outcome.cancelled)
        from gpuscope.runrecord.model import NsysSummary

        outcome.nsys = NsysSummary.of(result)
        if not result.ok:
            outcome.error = f"nsys: {result.reason}"
            outcome.failed = not outcome.stopped and not outcome.cancelled.is_set()
            left = self.session.kill()  # an nsys that failed (a lost agent) can leave its tools running
            if left:
                pids = ", ".join(map(str, sorted(left)))
                outcome.notes.append(f"stopped what the failed nsys left running: pid {pids}")
