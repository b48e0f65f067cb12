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

    def program_ended(self, ctx: RunContext) -> None:
        self.calls.append("program_ended")

    def finish(self, outcome: Outcome) -> None:
        self.calls.append("finish")
        self.rows = [p["role"] for p in outcome.processes]  # the event logs' rows come first
        outcome.extra["tracer"] = True


def test_a_callers_recorder_sees_the_whole_lifecycle(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    tracer = Tracer()
    run = Run(RunSpec(script=str(path), sample_interval_s=0.05), recorders=[tracer]).start()
    assert tracer.calls == ["prepare", "started"] and tracer.pid == run.pid
    assert "tracer was here" in run.notes
    result = run.wait()
    assert result.status is RunStatus.EXITED
    assert tracer.calls == ["prepare", "started", "program_ended", "finish"]
    assert tracer.output == b"tag from-a-recorder\n"
    assert tracer.batches >= 2
    assert tracer.rows == ["main"]


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
    assert result.processes and result.processes[0]["role"] == "main"


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
