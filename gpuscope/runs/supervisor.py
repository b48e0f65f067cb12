"""Start a run's process tree in its own session, watch it, stop it, and record the result.

``Run`` is used by the CLI (blocking ``wait``) and the app (``wait`` on a worker thread, ``stop``
from the GUI thread). Every state change goes to the run store; the run folder holds the spec,
the output and the event logs.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gpuscope import __version__
from gpuscope.errors import UserError
from gpuscope.runs import layout, procscan
from gpuscope.runs.launcher import build_command
from gpuscope.runs.output import OutputListener, OutputPump
from gpuscope.runs.status import ExitStatus
from gpuscope.spec import RunSpec
from gpuscope.store import db
from gpuscope.store import runs as store_runs

Progress = Callable[[str], None]
STOP_GRACE_S = 2.5
EXIT_HANG_S = 60.0  # a process past its exit handlers that still lives this long under nsys is hung


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    status: str                       # exited | failed | stopped | error
    exit: ExitStatus
    started_ns: int
    ended_ns: int
    processes: list[dict[str, Any]] = field(default_factory=list)
    left_running: list[int] = field(default_factory=list)   # alive after a run that ended by itself
    escaped: list[int] = field(default_factory=list)        # left the session (double fork, setsid)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    nsys: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "exit_code": self.exit.code,
            "signal": self.exit.signal,
            "run_dir": str(self.run_dir),
            "duration_s": round((self.ended_ns - self.started_ns) / 1e9, 3),
            "processes": self.processes,
            "left_running": self.left_running,
            "escaped": self.escaped,
            "notes": self.notes,
            "error": self.error,
            "nsys": self.nsys.to_dict() if self.nsys is not None else None,
        }


class Run:
    """One managed run. ``start()`` then ``wait()``; ``stop()`` from any thread."""

    def __init__(self, spec: RunSpec, *, output: list[OutputListener] | None = None,
                 progress: Progress | None = None, stdin: Any = subprocess.DEVNULL,
                 store_path: str | os.PathLike[str] | None = None):
        self.spec = spec.validated()
        self.run_id = layout.new_run_id()
        self.run_dir = layout.create_run_dir(self.run_id)
        self.output_listeners: list[OutputListener] = list(output or [])
        self.progress = progress or (lambda _msg: None)
        self._stdin = stdin
        self._store_path = store_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._pumps: list[OutputPump] = []
        self._stop_requested = threading.Event()
        self._stop_thread: threading.Thread | None = None
        self._escaped_on_stop: list[int] = []
        self._nsys_session: Any = None
        self.sampler: Any = None  # gpuscope.telemetry.sampler.RunSampler once started
        self._nsys_lock: Any = None
        self._first_log: Path | None = None
        self.notes: list[str] = []
        self.started_ns = 0
        self.listeners: list[Callable[[str, Any], None]] = []   # ("started"|"ended", payload)

    # -- start ------------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> "Run":
        command = build_command(self.spec, self.run_id, self.run_dir)
        argv, env = command.argv, command.env
        if self.spec.nsys.enabled:
            from gpuscope.nsys import record

            # Pool workers ended by SIGTERM, and fork children (which end with os._exit), exit
            # through C exit() so nsys flushes their ranges (gpuscope/inject/mpwrap.py).
            env["GPUSCOPE_UNDER_NSYS"] = "1"
            if self.spec.nsys.fork_tracing(self.spec.start_method):
                env["GPUSCOPE_NSYS_FORK"] = "1"
            self._nsys_session = record.prepare(self.spec, self.run_dir, argv, env)
            argv, env = self._nsys_session.argv, self._nsys_session.env
            self.notes.extend(self._nsys_session.notes)
        versions = _versions(self.spec)
        if self._nsys_session is not None:
            versions.update(self._nsys_session.versions())
        (self.run_dir / layout.SPEC).write_text(json.dumps(
            {"run_id": self.run_id, "spec": self.spec.to_dict(), "argv": argv, "versions": versions,
             "nsys_trace_fork": self.spec.nsys.fork_tracing(self.spec.start_method) if self.spec.nsys.enabled
             else None}, indent=2))
        with db.connect(self._store_path) as conn:
            store_runs.insert_run(conn, run_id=self.run_id, spec=self.spec.to_dict(),
                                  run_dir=str(self.run_dir), versions=versions)
        if self._nsys_session is not None:
            self._take_nsys_lock()
        try:
            self._proc = subprocess.Popen(argv, env=env, cwd=command.cwd, start_new_session=True,
                                          stdin=self._stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            if self._nsys_lock is not None:
                self._nsys_lock.release()
            message = f"cannot start {argv[0]}: {exc.strerror or exc}"
            self._record_failure(message, "stopped" if self._stop_requested.is_set() else "error")
            raise UserError(message) from None
        self.started_ns = time.time_ns()
        if self._nsys_session is not None:
            self._nsys_session.started(self._proc.pid)
        with db.connect(self._store_path) as conn:
            store_runs.mark_started(conn, self.run_id, self.started_ns)
        for name, pipe in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr)):
            assert pipe is not None
            log = self.run_dir / (layout.STDOUT if name == "stdout" else layout.STDERR)
            self._pumps.append(OutputPump(name, pipe.fileno(), str(log), self.output_listeners))
        self._start_sampler()
        # The summary needs numpy (~0.1 s to import): load it while the program runs, not after.
        threading.Thread(target=_preload_summary, name="gpuscope-preload", daemon=True).start()
        self._emit("started", self._proc.pid)
        return self

    def _start_sampler(self) -> None:
        """Telemetry of the run's tree (CPU, RSS, GPU) into the store; listeners may be added."""
        from gpuscope.telemetry.sampler import RunSampler

        assert self._proc is not None
        self.sampler = RunSampler(self._proc.pid, self.spec.sample_interval_s,
                                  store=self._store_path if self._store_path is not None else True,
                                  run_id=self.run_id)
        self.sampler.start()
        if not self.sampler.gpu.available and self.sampler.gpu.reason:
            self.notes.append(f"GPU telemetry off: {self.sampler.gpu.reason}")

    def _take_nsys_lock(self) -> None:
        from gpuscope.nsys.lock import NsysLock

        self._nsys_lock = NsysLock()
        if not self._nsys_lock.acquire(self.spec.nsys.timeout_s, self.progress, self._stop_requested.is_set):
            self._nsys_lock = None
            if self._stop_requested.is_set():
                message = "stopped while waiting for another nsys recording to finish"
            else:
                message = (f"another nsys recording kept this machine busy for {self.spec.nsys.timeout_s:.0f} s; "
                           "try again when it has finished")
            self._record_failure(message, "stopped" if self._stop_requested.is_set() else "error")
            raise UserError(message)

    def _record_failure(self, message: str, status: str = "error") -> None:
        with db.connect(self._store_path) as conn:
            store_runs.finish_run(conn, self.run_id, status=status, ended_ns=time.time_ns(),
                                  exit_code=None, signal=None, error=message)

    def _emit(self, what: str, payload: Any) -> None:
        for listener in list(self.listeners):
            try:
                listener(what, payload)
            except Exception:  # noqa: BLE001 - listeners (the app) must not break the run
                pass

    # -- stop -------------------------------------------------------------------------------------
    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the whole tree: SIGINT, then SIGTERM, then SIGKILL, each after a grace period.

        Returns at once; the escalation runs on a thread and ``wait()`` returns when it is done.
        A second call escalates immediately to SIGKILL.
        """
        if self._proc is None:
            self._stop_requested.set()  # still starting (waiting for the nsys lock): start() gives up
            return
        if self._stop_requested.is_set():
            self._signal_all(signal.SIGKILL)
            return
        self._stop_requested.set()
        self._stop_thread = threading.Thread(target=self._escalate, args=(grace_s,),
                                             name="gpuscope-stop", daemon=True)
        self._stop_thread.start()

    def _tree(self) -> dict[int, procscan.ProcInfo]:
        assert self._proc is not None
        return procscan.run_processes(self._proc.pid, self.run_id)

    def _signal_all(self, sig: int) -> int:
        tree = self._tree()
        for pid, info in tree.items():
            if info.sid != self._proc.pid and pid not in self._escaped_on_stop:  # type: ignore[union-attr]
                self._escaped_on_stop.append(pid)
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        return len(tree)

    def _escalate(self, grace_s: float) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            self.progress(f"stopping: sending {signal.Signals(sig).name} to the run's processes")
            if self._signal_all(sig) == 0:
                break
            deadline = time.monotonic() + (grace_s if sig != signal.SIGKILL else 5.0)
            while time.monotonic() < deadline:
                if not self._tree():
                    break
                time.sleep(0.05)
            else:
                continue
            break
        if self._nsys_session is not None:
            self._nsys_session.kill()

    # -- wait -------------------------------------------------------------------------------------
    def wait(self) -> RunResult:
        """Block until the run has ended and been recorded."""
        assert self._proc is not None, "start() first"
        hang = None
        if self._nsys_session is None:
            returncode = self._proc.wait()
        else:
            returncode, hang = self._wait_under_nsys()
        ended_ns = time.time_ns()
        if self._stop_thread is not None:
            self._stop_thread.join()
        for pump in self._pumps:
            if not pump.join(timeout=1.0):
                self.notes.append(f"a process that outlived the run still holds its {pump.name}; "
                                  "its later output is still saved in the run folder")
        exit_status = ExitStatus.from_returncode(returncode)
        stopped = self._stop_requested.is_set()
        left = [] if stopped else self._settle()
        status = "stopped" if stopped else ("exited" if exit_status.code == 0 else "failed")
        error = None
        nsys_result = None
        if hang is not None:
            self._nsys_lock.release()
            error = f"nsys: {hang}"
            status = "failed"
        elif self._nsys_session is not None:
            try:
                nsys_result = self._nsys_session.finish(self.progress, self.spec.nsys.timeout_s)
            finally:
                self._nsys_lock.release()
            if not nsys_result.ok:
                error = f"nsys: {nsys_result.reason}"
                status = "failed" if status == "exited" else status
        from gpuscope.runs.process_rows import collect_processes, merge_telemetry

        root_role = "torchrun agent" if self.spec.launcher == "torchrun" else "main"
        processes = collect_processes(self.run_dir, root_role, exit_status.code)
        if self.sampler is not None:
            self.sampler.stop()
            merge_telemetry(processes, self.sampler.process_summary())
        escaped = sorted(set(self._escaped_on_stop) | {p for p in left if procscan.read_stat(p) and
                                                       procscan.read_stat(p).sid != self._proc.pid})
        result = RunResult(run_id=self.run_id, run_dir=self.run_dir, status=status, exit=exit_status,
                           started_ns=self.started_ns, ended_ns=ended_ns, processes=processes,
                           left_running=left, escaped=escaped, notes=list(self.notes), error=error,
                           nsys=nsys_result)
        self._record(result)
        self._emit("ended", result)
        return result

    def _wait_under_nsys(self) -> tuple[int, str | None]:
        """Wait for ``nsys profile``; if it outlives the program by more than the nsys timeout
        (NSYS.md: it can hang in "Generating ...qdstrm"), stop it with its agent."""
        assert self._proc is not None and self._nsys_session is not None
        limit = self.spec.nsys.timeout_s
        program_gone_at: float | None = None
        while True:
            try:
                return self._proc.wait(timeout=0.5), None
            except subprocess.TimeoutExpired:
                pass
            program = [p for p, info in self._tree().items() if info.comm != "nsys" and p != self._proc.pid]
            # The program's first process past its last line of Python but not gone: nsys's own exit
            # handlers hold it (seen with 2024.2: stuck in a futex until killed). Give it a minute.
            finished = program and self._program_finished()
            if program and not finished:
                program_gone_at = None
                continue
            program_gone_at = program_gone_at or time.monotonic()
            bound = min(limit, EXIT_HANG_S) if finished else limit
            if time.monotonic() - program_gone_at > bound:
                self.progress(f"nsys: still busy {bound:.0f} s after the program ended; stopping it")
                self._nsys_session.kill()
                returncode = self._proc.wait()
                return returncode, (f"nsys did not finish within {bound:.0f} s after the program ended "
                                    "(hung); it was stopped with its agent and the program's processes")

    def _program_finished(self) -> bool:
        """Whether the run's first program process (main, or torchrun's agent) has run its exit
        handlers (the X line of its event log). Polled: the log is looked up once."""
        from gpuscope.trace.events import first_process_log, log_has_exit

        if self._first_log is None:
            self._first_log = first_process_log(self.run_dir)
        return self._first_log is not None and log_has_exit(self._first_log)

    def _settle(self, timeout_s: float = 1.5) -> list[int]:
        """Processes still alive after the run ended by itself (given a moment to exit)."""
        deadline = time.monotonic() + timeout_s
        tree = self._tree()
        while tree and time.monotonic() < deadline:
            time.sleep(0.05)
            tree = self._tree()
        return sorted(tree)

    def _record(self, result: RunResult) -> None:
        summary = result.to_json()
        (self.run_dir / layout.SUMMARY).write_text(json.dumps(summary, indent=2))
        with db.connect(self._store_path) as conn:
            store_runs.finish_run(conn, self.run_id, status=result.status, ended_ns=result.ended_ns,
                                  exit_code=result.exit.code, signal=result.exit.signal,
                                  error=result.error, summary=summary)
            store_runs.replace_processes(conn, self.run_id, result.processes)


def _preload_summary() -> None:
    import gpuscope.runs.process_rows  # noqa: F401


def _versions(spec: RunSpec) -> dict[str, Any]:
    return {
        "gpuscope": __version__,
        "python": platform.python_version(),
        "target_python": spec.python,
        "platform": platform.platform(),
        "host": platform.node(),
        "argv": sys.argv,
    }
