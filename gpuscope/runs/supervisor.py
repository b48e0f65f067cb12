"""Start a run's process tree in its own session, watch it, stop it, and record the result.

``Run`` is used by the CLI (blocking ``wait``) and the app (``wait`` on a worker thread, ``stop``
from the GUI thread). Every state change goes to the run store; the run folder holds the spec,
the output and the event logs. What records the run (event logs, telemetry, nsys, and whatever a
caller adds) are recorders (``gpuscope.runs.recorder``): ``Run`` only sequences them. The program
starts first; gpuscope's own imports and store work follow while it runs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import TYPE_CHECKING

from gpuscope.errors import UserError
from gpuscope import rundir as layout
from gpuscope.procs.existing import Existing
from gpuscope.runs.launcher import build_command
from gpuscope.runs.output import OutputPump
from gpuscope.runs.pipes import open_output
from gpuscope.runs.recorder import BaseRecorder, InRunFolder, Launch, Outcome, RunContext, overrides
from gpuscope.runs.recorders import default_recorders
from gpuscope.runs.versions import versions
from gpuscope.status import ExitStatus, RunStatus, signal_name
from gpuscope.spec import RunSpec

if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    from gpuscope.procs.read import ProcInfo
    from gpuscope.runs.output import OutputListener
    import subprocess

    from gpuscope.runs.early import EarlyStart
    from gpuscope.runrecord.model import RunRecord
    from gpuscope.trace.events import RunEvents

    RunResult = RunRecord
    Progress = Callable[[str], None]

# json, gpuscope.procs (/proc) and the store are imported where used: after the program started.
STOP_GRACE_S = 2.5
EMPTY_GRACE_S = 0.5   # output still open this long after the run's last process ended: held by one that escaped


def __getattr__(name: str) -> Any:
    """``RunResult``: what ``Run.wait`` returns, the run's record (gpuscope.runrecord.RunRecord),
    imported when first asked for: the record's classes are made after the program started."""
    if name == "RunResult":
        from gpuscope.runrecord.model import RunRecord

        return RunRecord
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Run(InRunFolder):
    """One managed run. ``start()`` then ``wait()``; ``stop()`` from any thread.

    ``recorders`` are added after the default ones (event logs, telemetry, nsys when asked).
    ``stdin``: what ``Popen`` takes (None: gpuscope's own), or ``"devnull"`` (the default).
    ``live_output`` gives the program's stdout a pseudo-terminal (the line buffering it has in a
    terminal, bytes unchanged) instead of a pipe; default: when ``output`` listeners watch it.
    ``output_cap_bytes`` bounds each saved stream (head and tail kept; default from the
    environment, see ``gpuscope.runs.output.output_cap_bytes``). ``early``: the program, already
    started by ``gpuscope.runs.early`` for this ``spec``, that ``start()`` adopts instead of starting it.
    """

    def __init__(self, spec: RunSpec, *, output: list[OutputListener] | None = None,
                 progress: Progress | None = None, stdin: Any = "devnull",
                 store_path: str | os.PathLike[str] | None = None, recorders: Sequence[BaseRecorder] = (),
                 live_output: bool | None = None, output_cap_bytes: int | None = None,
                 early: EarlyStart | None = None):
        self._early = early
        if early is not None:
            self.spec = early.spec(spec)
            self.run_id, self.run_folder = early.run_id, early.run_dir
        else:
            self.spec = spec.validated()
            # the data folder's walk to make every older run private waits until the program runs
            self.run_id = layout.new_run_id(tighten=False)
            self.run_folder = layout.create_run_folder(self.run_id, tighten=False)
        self.output_listeners: list[OutputListener] = list(output or [])
        self.progress = progress or (lambda _msg: None)
        self.recorders: list[BaseRecorder] = [*default_recorders(self.spec, store_path), *recorders]
        self._live = bool(output) if live_output is None else live_output
        self._cap = output_cap_bytes
        self._stdin = stdin
        self._store_path = store_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._pumps: list[OutputPump] = []
        self._stop_requested = threading.Event()
        self._stop_lock = threading.Lock()
        self._stop_thread: threading.Thread | None = None
        self._escaped_on_stop: list[int] = []
        self._outcome: Outcome | None = None
        self._recording: threading.Thread | None = None
        self._record_error: BaseException | None = None
        self._conn: Any = None   # the store connection _record_start opened, released by _record
        self._ctx: RunContext | None = None
        self._existing: Existing | None = None     # the host's processes just before the program
        self.notes: list[str] = []
        self.started_ns = 0
        self._versions: dict[str, Any] = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def events(self) -> RunEvents | None:
        """The run's one event-log reader once started (``RunEvents``: roles, the program's end)."""
        return self._ctx.events if self._ctx is not None else None

    @property
    def sampler(self) -> Any:
        """The telemetry recorder's ``RunSampler`` once started (the app listens to it)."""
        return next((getattr(r, "sampler", None) for r in self.recorders if r.name == "telemetry"), None)

    # -- start ------------------------------------------------------------------------------------
    def start(self) -> "Run":
        """Start the program first; then record the run and start the recorders while it runs."""
        early = self._early
        command = early.command if early is not None else build_command(self.spec, self.run_id, self.run_folder)
        launch = Launch(self.spec, self.run_id, self.run_folder, list(command.argv), dict(command.env), command.cwd,
                        notes=self.notes, progress=self.progress,
                        stop_requested=self._stop_requested)
        for recorder in self.recorders:
            try:
                recorder.prepare(launch)
            except UserError as exc:
                if early is not None:
                    early.abandon()
                self._abort(str(exc))
                raise
            except Exception as exc:  # noqa: BLE001 - a recorder's bug must not stop the run
                self._note_failure(recorder, "prepare", exc)
        if early is not None:   # started before gpuscope's imports: its output is read from here on
            self._existing = early.existing
            self._proc = early.proc
            self._pump(early.proc, early.read_out)
            self.started_ns = early.started_ns
        else:
            self._proc = self._spawn(launch)
            self.started_ns = time.time_ns()
        # From here on the program runs: gpuscope's own imports and store work overlap with it. The
        # spec file and the store's row are written on a thread (runs/versions.py: `uname -p` at the first run).
        self._recording = threading.Thread(target=self._record_start, args=(launch,), name="gpuscope-record-start",
                                         daemon=True)
        self._recording.start()
        from gpuscope.trace.events import RunEvents   # after the program started: off its start's path

        self._ctx = RunContext(self.spec, self.run_id, self.run_folder, self._proc.pid, self.started_ns,
                               self._stop_requested, notes=self.notes, progress=self.progress,
                               existing=self._existing, events=RunEvents(self.run_folder))
        self._connect_batches()
        self._each("started", self._ctx)
        if self._stop_requested.is_set() and self._stop_thread is None:  # Stop came while it started
            self._stop_thread = threading.Thread(target=self._escalate, args=(STOP_GRACE_S,),
                                               name="gpuscope-stop", daemon=True)
            self._stop_thread.start()
        return self

    def _spawn(self, launch: Launch) -> subprocess.Popen[bytes]:
        """Start the first process with its stdout on a pty or pipe; its output pumps read both."""
        import subprocess

        child_out, read_out = open_output(self._live)
        self._existing = Existing()
        try:
            proc = subprocess.Popen(launch.argv, env=launch.env, cwd=launch.cwd, start_new_session=True,
                                    stdin=subprocess.DEVNULL if self._stdin == "devnull" else self._stdin,
                                    stdout=child_out, stderr=subprocess.PIPE)
        except OSError as exc:
            os.close(read_out)
            message = f"cannot start {launch.argv[0]}: {exc.strerror or exc}"
            self._abort(message)
            raise UserError(message) from None
        finally:
            os.close(child_out)
        self._pump(proc, read_out)
        return proc

    def _pump(self, proc: subprocess.Popen[bytes], read_out: int) -> None:
        """Pumps that read the program's stdout (``read_out``) and stderr to the listeners and the run folder."""
        listeners = [*self.output_listeners, *(r.on_output for r in self.recorders if overrides(r, "on_output"))]
        assert proc.stderr is not None
        # each pump closes its end once read to EOF (a process that outlived the run may hold it longer)
        for name, fd, close in (("stdout", read_out, lambda: os.close(read_out)),
                                ("stderr", proc.stderr.fileno(), proc.stderr.close)):
            log = os.path.join(self.run_folder, layout.STDOUT if name == "stdout" else layout.STDERR)
            self._pumps.append(OutputPump(name, fd, log, listeners, cap_bytes=self._cap, close=close))

    def _record_start(self, launch: Launch) -> None:
        """spec.json and the store's row of the started run (``wait`` raises what failed here)."""
        try:
            from gpuscope import paths

            paths.data_root()   # makes what is in it private (a walk of every run the first time: paths.PRIVATE_MARK)
            launch.versions = self._versions = {**versions(self.spec), **launch.versions}
            self._write_spec(launch)
            from gpuscope.store import db
            from gpuscope.store import runs as store_runs

            self._conn = db.connect(self._store_path)   # kept for the run's end (_record): one open, one close
            with self._conn as conn:
                store_runs.insert_run(conn, run_id=self.run_id, spec=self.spec.to_dict(),
                                      run_dir=self.run_folder, versions=launch.versions)
                store_runs.mark_started(conn, self.run_id, self.started_ns)
        except BaseException as exc:  # noqa: BLE001 - raised again by wait(), on the caller's thread
            self._record_error = exc

    def _write_spec(self, launch: Launch) -> None:
        nsys = self.spec.nsys
        _write_json(os.path.join(self.run_folder, layout.SPEC), {
            "run_id": self.run_id, "spec": self.spec.to_dict(), "argv": launch.argv, "versions": launch.versions,
            "nsys_trace_fork": nsys.fork_tracing(self.spec.start_method) if nsys.enabled else None})

    def _connect_batches(self) -> None:
        """Telemetry batches go on to every recorder that wants them."""
        takers = [r for r in self.recorders if overrides(r, "on_batch")]
        if not takers:
            return

        def deliver(batch: Any) -> None:
            for recorder in takers:
                self._call(recorder, "on_batch", batch)

        from gpuscope.runs.recorders.telemetry_sampling import TelemetryRecorder

        for recorder in self.recorders:
            if isinstance(recorder, TelemetryRecorder):
                recorder.batch_sink = deliver

    def _abort(self, message: str) -> None:
        """The program never started: record why and let recorders undo what ``prepare`` took."""
        outcome = Outcome(ExitStatus(None, None), self._stop_requested.is_set(), time.time_ns(),
                          notes=self.notes, launched=False, progress=self.progress)
        self._each("finish", outcome)
        status = RunStatus.STOPPED if self._stop_requested.is_set() else RunStatus.ERROR
        from gpuscope.store import db
        from gpuscope.store import runs as store_runs

        with db.connect(self._store_path) as conn:
            store_runs.insert_run(conn, run_id=self.run_id, spec=self.spec.to_dict(),
                                  run_dir=self.run_folder, versions=versions(self.spec))
            store_runs.finish_run(conn, self.run_id, status=status, ended_ns=time.time_ns(),
                                  exit_code=None, signal=None, error=message)

    def _each(self, method: str, *args: Any) -> None:
        for recorder in self.recorders:
            self._call(recorder, method, *args)

    def _call(self, recorder: BaseRecorder, method: str, *args: Any) -> None:
        try:
            getattr(recorder, method)(*args)
        except Exception as exc:  # noqa: BLE001 - a recorder's bug must not stop the run or the others
            self._note_failure(recorder, method, exc)

    def _note_failure(self, recorder: BaseRecorder, method: str, exc: Exception) -> None:
        note = f"{recorder.name} recorder failed in {method}: {type(exc).__name__}: {exc}"
        if note not in self.notes:
            self.notes.append(note)

    # -- stop -------------------------------------------------------------------------------------
    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the program's whole tree: SIGINT, then SIGTERM, then SIGKILL, each after a grace period.

        Returns at once; the escalation runs on a thread and ``wait()`` returns when it is done.
        Recorders' own processes (nsys) are left to finish their work (the nsys report is written,
        imported and exported). A second call kills the program at once and abandons what the
        recorders were still recording. A call while recorders finish (nsys import or export) ends
        their tools and keeps what was recorded.
        """
        with self._stop_lock:
            first = not self._stop_requested.is_set()
            self._stop_requested.set()
        if self._outcome is not None:
            if not self._outcome.cancelled.is_set():
                self.progress("stopping: ending the recording's import and export; what was recorded is kept")
            self._outcome.cancelled.set()
            return
        if self._proc is None:
            return  # still starting (waiting for the nsys lock): start() gives up
        if first:
            self._stop_thread = threading.Thread(target=self._escalate, args=(grace_s,),
                                               name="gpuscope-stop", daemon=True)
            self._stop_thread.start()
            return
        self.progress("stopping at once: killing the run's processes and abandoning what was still recorded")
        self._signal_all(signal.SIGKILL)
        self._each("abandon")

    def _tree(self) -> dict[int, ProcInfo]:
        from gpuscope.procs.membership import run_processes

        assert self._proc is not None
        return run_processes(self._proc.pid, self.run_id, existing=self._existing)

    def _own(self, tree: dict[int, ProcInfo]) -> set[int]:
        """The recorders' own processes in ``tree`` (nsys): a first Stop leaves them to finish."""
        own: set[int] = set()
        for recorder in self.recorders:
            try:
                own |= recorder.own_processes(tree)
            except Exception as exc:  # noqa: BLE001
                self._note_failure(recorder, "own_processes", exc)
        return own

    def _program(self) -> dict[int, ProcInfo]:
        tree = self._tree()
        own = self._own(tree)
        return {p: info for p, info in tree.items() if p not in own}

    def _signal_all(self, sig: int, program_only: bool = False) -> int:
        from gpuscope.procs.signals import send_signal

        tree = self._tree()
        own = self._own(tree)
        home = {self._proc.pid} | {info.sid for info in tree.values() if info.ppid in own}  # type: ignore[union-attr]
        targets = {p: i for p, i in tree.items() if p not in own} if program_only else tree
        for pid, info in targets.items():
            if info.sid not in home and pid not in self._escaped_on_stop:
                self._escaped_on_stop.append(pid)
            send_signal(info.key, sig)   # by (pid, start): never a process that got the pid since the scan
        return len(targets)

    def _escalate(self, grace_s: float) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            self.progress(f"stopping: sending {signal_name(sig)} to the run's processes")
            if self._signal_all(sig, program_only=True) == 0:
                break
            deadline = time.monotonic() + (grace_s if sig != signal.SIGKILL else 5.0)
            while time.monotonic() < deadline:
                if not self._program():
                    break
                time.sleep(0.05)
            else:
                continue
            break
        if self._proc is not None and self._proc.poll() is None and self._own(self._tree()):
            self.progress("stopping: the program has ended; nsys is writing its report (stop again to abandon it)")

    # -- wait -------------------------------------------------------------------------------------
    def wait(self) -> RunRecord:
        """Block until the run has ended and been recorded."""
        assert self._proc is not None and self._ctx is not None, "start() first"
        # what the end reads /proc with and records the run in: loaded while the program runs
        from gpuscope.procs import membership  # noqa: F401
        from gpuscope.runrecord.model import NsysSummary, RunRecord
        returncode = self._proc.wait()
        ended_ns = time.time_ns()
        self._each("main_exited", self._ctx)   # while the rest of the tree ends (the resource tracker)
        if self._stop_thread is not None:
            self._stop_thread.join()
        self._join_pumps()
        self._each("program_ended", self._ctx)
        exit_status = ExitStatus.from_returncode(returncode)
        left = [] if self._stop_requested.is_set() else self._settle()
        outcome = Outcome(exit_status, self._stop_requested.is_set(), ended_ns, notes=self.notes,
                          progress=self.progress)
        with self._stop_lock:
            self._outcome = outcome
            if self._stop_requested.is_set() and not outcome.stopped:
                outcome.stopped = True  # stopped in between: it still counts
        self._each("finish", outcome)
        status = _status(outcome, exit_status, self._stop_requested.is_set())
        from gpuscope.procs.read import read as read_stat

        escaped = sorted(set(self._escaped_on_stop) | {p for p in left if (i := read_stat(p)) and
                                                       i.sid != self._proc.pid})
        result = RunRecord(run_id=self.run_id, run_folder=self.run_folder, status=status, exit=exit_status,
                           started_ns=self.started_ns, ended_ns=ended_ns, processes=outcome.processes,
                           left_running=left, escaped=escaped, notes=list(self.notes), error=outcome.error,
                           nsys=NsysSummary.of(outcome.nsys), findings=list(outcome.findings),
                           sampled=list(outcome.sampled),
                           spec=self.spec.to_dict(), versions=dict(self._versions),
                           torch_traces=list(outcome.torch_traces))
        self._record(result)
        return result

    def _join_pumps(self, quiet_s: float = 1.0, cap_s: float = 5.0) -> None:
        """Read the output to its end before the run is reported ended.

        A child of the run that is still exiting (multiprocessing's resource tracker, a pool worker
        being reaped) holds the pipes open: wait for it (up to ``cap_s``). After ``quiet_s``, a pipe
        still open ``EMPTY_GRACE_S`` after the run's last process was seen is held by one that
        escaped the run (the grace lets the pump read what a process printed just before it ended,
        on a loaded machine); its later output still goes to the run folder, and a note says so.
        """
        assert self._proc is not None
        start = time.monotonic()
        empty_since: float | None = None    # no process of the run seen since (a pump may still be
        for pump in self._pumps:            # reading the last lines of one that just ended)
            while not pump.join(timeout=0.05):
                now = time.monotonic()
                if now - start > quiet_s:
                    if self._tree():
                        empty_since = None
                    elif empty_since is None:
                        empty_since = now
                if now - start > cap_s or (empty_since is not None and now - empty_since >= EMPTY_GRACE_S):
                    self.notes.append(f"a process that outlived the run still holds its {pump.name}; "
                                      "its later output is still saved in the run folder")
                    break

    def _settle(self, timeout_s: float = 1.5) -> list[int]:
        """Processes still alive after the run ended by itself (given a moment to exit). The ones
        seen are watched one by one (one /proc stat each, soon after the scan, then less and less
        often, up to ``delay``'s cap apart; multiprocessing's resource tracker ends just after the
        program), and once they are gone the run is scanned again for any they started."""
        from gpuscope.procs.read import read as read_stat

        deadline = time.monotonic() + timeout_s
        tree = self._tree()
        delay = 0.002
        while tree and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(2 * delay, 0.05)
            if not any(_same_process(read_stat(pid), info) for pid, info in tree.items()):
                tree = self._tree()
        if tree:
            tree = self._tree()
        return sorted(tree)

    def _record(self, result: RunRecord) -> None:
        if self._recording is not None:
            self._recording.join()
        conn, self._conn = self._conn, None
        try:
            if self._record_error is not None:
                raise self._record_error
            # the run's one record; the store's rows below are an index derived from it
            _write_json(os.path.join(self.run_folder, layout.SUMMARY), result.to_json())
            from gpuscope.store import runs as store_runs

            if conn is None:
                from gpuscope.store import db

                conn = db.connect(self._store_path)
            with conn:
                store_runs.finish_run(conn, self.run_id, status=result.status, ended_ns=result.ended_ns,
                                      exit_code=result.exit.code, signal=result.exit.signal,
                                      error=result.error, processes=result.processes)
        finally:
            if conn is not None:
                from gpuscope.store import db

                db.release(conn)   # closed, or kept for gpuscope run's os._exit (db.hold_until_exit)


def _write_json(path: str, data: dict[str, Any]) -> None:
    import json

    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)


def _same_process(now: Any, seen: Any) -> bool:
    """``now`` (a fresh /proc read, or None) is the live process ``seen`` was (not a reused pid)."""
    return now is not None and not now.is_zombie and now.start_ticks == seen.start_ticks


def _status(outcome: Outcome, exit_status: ExitStatus, stopped: bool) -> RunStatus:
    """A recorder that failed the run (a hung nsys) wins; then a Stop; then the exit code."""
    if outcome.failed:
        return RunStatus.FAILED
    if stopped:
        return RunStatus.STOPPED
    return RunStatus.EXITED if exit_status.code == 0 else RunStatus.FAILED
