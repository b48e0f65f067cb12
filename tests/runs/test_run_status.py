"""RunStatus describes itself: one phrase per state, the same in the CLI, the history and compare."""

from __future__ import annotations

import json

import pytest

from gpuscope.status import ExitStatus, RunStatus, describe_run


@pytest.mark.parametrize(("status", "exit", "error", "text"), [
    (RunStatus.EXITED, ExitStatus(0, None), None, "exited (exit code 0)"),
    (RunStatus.FAILED, ExitStatus(3, None), None, "failed (exit code 3)"),
    (RunStatus.FAILED, ExitStatus(None, "SIGKILL"), None, "failed (killed by SIGKILL)"),
    (RunStatus.FAILED, ExitStatus(None, None), None, "failed"),
    (RunStatus.STOPPED, ExitStatus(None, "SIGINT"), None, "stopped"),
    (RunStatus.RUNNING, None, None, "still running"),
    (RunStatus.ERROR, None, "cannot start x: No such file", "error: cannot start x: No such file"),
    (RunStatus.ERROR, None, None, "error"),
])
def test_each_state_says_what_it_is(status, exit, error, text):
    assert status.describe(exit, error) == text


def test_stored_text_reads_back_as_the_member():
    for status in RunStatus:
        assert RunStatus.parse(status.value) is status
        assert json.loads(json.dumps({"s": status}))["s"] == status.value     # JSON keeps the text
        assert f"{status}" == str(status) == status.label == status.value     # tables print the text
    assert RunStatus.parse("exploded") is RunStatus.ERROR      # text no gpuscope wrote
    assert describe_run("failed", 2, None) == "failed (exit code 2)"
    assert describe_run("failed", None, "SIGSEGV") == "failed (killed by SIGSEGV)"


def test_only_a_clean_exit_is_ok_and_only_running_is_not_final():
    assert [s for s in RunStatus if s.ok] == [RunStatus.EXITED]
    assert [s for s in RunStatus if not s.final] == [RunStatus.RUNNING]
    assert RunStatus.STOPPED.outcome == "was stopped" and RunStatus.ERROR.outcome == "failed"
    assert RunStatus.EXITED.outcome == "exited"


def test_exit_status_from_a_return_code():
    assert ExitStatus.from_returncode(0) == ExitStatus(0, None)
    assert ExitStatus.from_returncode(-9) == ExitStatus(None, "SIGKILL")
    assert ExitStatus.from_returncode(137).describe() == "exit code 137"
