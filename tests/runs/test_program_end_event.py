"""The program's end is an event of the run's event-log reader: under nsys, heard before nsys ends."""

from __future__ import annotations

import os
import time

import pytest

from gpuscope.nsys import locate
from gpuscope.runs.supervisor import Run
from gpuscope.spec import NsysOptions, RunSpec
from gpuscope.status import RunStatus
from tests.nsys_versions import NEWEST

pytestmark = pytest.mark.nsys


def test_the_program_end_is_heard_before_nsys_has_finished(tmp_path, gpuscope_home, monkeypatch):
    installs = locate.provisioned_installs()
    if NEWEST not in installs:
        if os.environ.get("CI") == "true":
            pytest.fail("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
        pytest.skip("Nsight Systems is not provisioned (run scripts/provision_nsys.py)")
    monkeypatch.setenv("GPUSCOPE_NSYS", str(installs[NEWEST].nsys))
    program = tmp_path / "short.py"
    program.write_text("print('done')\n")
    spec = RunSpec(script=str(program), nsys=NsysOptions(enabled=True, trace=("osrt",)))
    run = Run(spec, store_path=gpuscope_home / "store.sqlite").start()
    heard: list[int] = []
    assert run.events is not None
    run.events.on_first_exit(lambda: heard.append(time.time_ns()))
    result = run.wait()
    assert result.status is RunStatus.EXITED, (result.error, result.notes)
    # result.ended_ns: when the run's first process (nsys, which writes its report after the
    # program) was reaped; the program's end was heard before that
    assert len(heard) == 1 and heard[0] < result.ended_ns
