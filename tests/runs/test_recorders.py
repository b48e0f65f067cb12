"""The recorder lifecycle (gpuscope.runs.recorder): a caller's recorder sees one run, in order."""

from __future__ import annotations

import threading

import pytest

from gpuscope.errors import UserError
from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext
from gpuscope.status import RunStatus
from gpuscope.runs.supervisor import Run
from gpuscope.spec import RunSpec
from gpuscope.store import db
from gpuscope.store import runs as store_runs

PROGRAM = "import os, time\nprint('tag', os.environ.get('GPUSCOPE_TEST_TAG'), flush=True)\ntime.sleep(0.5)\n"


class Tracer(BaseRecorder):
    name = "tracer"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.batches = 0
        self.output = b""
        self.pid = None
        self.rows = None
        self.events = False
        self.thread = threading.get_ident()

    def prepare(self, launch: Launch) -> None:
        self.calls.append("prepare")
        launch.env["GPUSCOPE_TEST_TAG"] = "from-a-recorder"
        launch.notes.append("tracer was here")

    def started(self, ctx: RunContext) -> None:
        self.calls.append("started")
        self.pid = ctx.pid

    def on_batch(self, batch) -> None:  # type: ignore[no-untyped-def]
        self.batches += 1

    def on_output(self, stream: str, chunk: bytes) -> None:
        if stream == "stdout":
            self.output += chunk

    def main_exited(self, ctx: RunContext) -> None:
        self.calls.append("main_exited")

    def program_ended(self, ctx: RunContext) -> None:
        self.calls.append("program_ended")

    def finish(self, outcome: Outcome) -> None:
        self.calls.append("finish")
        self.rows = [p.role for p in outcome.processes]  # the event logs' rows come first
        self.events = outcome.events is not None       # and the run's reader they were read with


def test_a_callers_recorder_sees_the_whole_lifecycle(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    tracer = Tracer()
    run = Run(RunSpec(script=str(path), sample_interval_s=0.05), recorders=[tracer]).start()
    assert tracer.calls == ["prepare", "started"] and tracer.pid == run.pid
    assert "tracer was here" in run.notes
    result = run.wait()
    assert result.status is RunStatus.EXITED
    assert tracer.calls == ["prepare", "started", "main_exited", "program_ended", "finish"]
    assert tracer.output == b"tag from-a-recorder\n"
    assert tracer.batches >= 2
    assert tracer.rows == ["main"] and tracer.events


class Broken(BaseRecorder):
    name = "broken"

    def on_output(self, stream: str, chunk: bytes) -> None:
        raise RuntimeError("boom in on_output")

    def finish(self, outcome: Outcome) -> None:
        raise RuntimeError("boom in finish")


def test_a_broken_recorder_is_a_note_not_a_failed_run(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    result = Run(RunSpec(script=str(path)), recorders=[Broken()]).start().wait()
    assert result.status is RunStatus.EXITED
    assert any("broken recorder failed in finish: RuntimeError: boom in finish" in n for n in result.notes)
    assert (result.run_dir / "stdout.log").read_bytes() == b"tag None\n"
    assert result.processes and result.processes[0].role == "main"


class Refuses(BaseRecorder):
    name = "refuses"

    def __init__(self) -> None:
        self.finished: list[bool] = []

    def prepare(self, launch: Launch) -> None:
        raise UserError("this recorder cannot record here")

    def finish(self, outcome: Outcome) -> None:
        self.finished.append(outcome.launched)


def test_a_recorder_that_refuses_ends_the_run_before_it_starts(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text("open(__file__ + '.ran', 'w').close()\n")
    refuses = Refuses()
    run = Run(RunSpec(script=str(path)), recorders=[refuses])
    with pytest.raises(UserError, match="cannot record here"):
        run.start()
    assert refuses.finished == [False]
    assert not (tmp_path / "prog.py.ran").exists()
    with db.connect() as conn:
        row = store_runs.get_run(conn, run.run_id)
    assert row.status == "error" and "cannot record here" in row.error


# The main process ends at once; its child (which holds the output pipes) 1 s later, as
# multiprocessing's resource tracker does a few ms after a pool program. The child's pid goes to the
# file given as the argument (read once the main process has ended: no race with the output's reader).
OUTLIVED = ("import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.0); print(\"late\")'])\n"
            "open(sys.argv[1], 'w').write(str(child.pid))\n")


class TreeWatcher(BaseRecorder):
    """Whether the main process's child was still alive at each step, and the output seen by then."""

    name = "tree watcher"

    def __init__(self, pid_file) -> None:  # type: ignore[no-untyped-def]
        self.pid_file = pid_file
        self.child_alive: dict[str, bool] = {}
        self.child = 0
        self.rows: list[str] = []
        self.output = b""
        self.output_at: dict[str, bytes] = {}

    def on_output(self, stream: str, chunk: bytes) -> None:
        self.output += chunk

    def _alive(self) -> bool:
        from gpuscope.procs.read import read as read_stat

        info = read_stat(self.child)
        return info is not None and not info.is_zombie

    def main_exited(self, ctx: RunContext) -> None:
        self.child = int(self.pid_file.read_text())
        self.child_alive["main_exited"] = self._alive()
        self.output_at["main_exited"] = self.output

    def program_ended(self, ctx: RunContext) -> None:
        self.output_at["program_ended"] = self.output

    def finish(self, outcome: Outcome) -> None:
        self.rows = sorted(p.role for p in outcome.processes)


def test_main_exited_comes_while_the_rest_of_the_tree_still_ends(tmp_path):
    """``main_exited`` as soon as the first process ended (its child still runs); ``program_ended``
    once the output has ended (the child printed its last line and closed it); the child's row is
    read after it ended (its log, read ahead at ``main_exited``, is read again: it grew)."""
    path, pid_file = tmp_path / "prog.py", tmp_path / "child.pid"
    path.write_text(OUTLIVED)
    watcher = TreeWatcher(pid_file)
    result = Run(RunSpec(script=str(path), args=(str(pid_file),), sample_interval_s=0.05),
                 recorders=[watcher]).start().wait()
    assert result.status is RunStatus.EXITED, result.to_json()
    assert watcher.child_alive == {"main_exited": True}
    assert b"late" not in watcher.output_at["main_exited"] and b"late" in watcher.output_at["program_ended"]
    assert watcher.rows == ["main", "subprocess"]
    child = next(p for p in result.processes if p.role == "subprocess")
    assert child.exit_code == 0, child


def test_the_samplers_last_stop_fails_as_a_note_of_the_run(tmp_path, monkeypatch):
    """The telemetry recorder stops its sampler on a thread of its own at ``main_exited``; what that
    stop raises (a store that fails on its last flush) reaches the run as a recorder's note, in the
    run's thread, not as a thread's traceback on the user's terminal."""
    from gpuscope.runs.recorders.telemetry_sampling import TelemetryRecorder
    from gpuscope.telemetry.sampler import RunSampler

    def failing_close(self):
        raise RuntimeError("the store's last flush failed")

    monkeypatch.setattr(RunSampler, "_close", failing_close)
    tracebacks: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: tracebacks.append(args.thread.name))
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    result = Run(RunSpec(script=str(path), sample_interval_s=0.05), recorders=[TelemetryRecorder(store_path=False)],
                 ).start().wait()
    assert result.status is RunStatus.EXITED, result.to_json()
    assert any("telemetry recorder failed in program_ended: RuntimeError: the store's last flush failed" in n
               for n in result.notes), result.notes
    assert tracebacks == []
