"""Retries of nsys steps that fail on their own, measured, and reported in the test output.

Only a step that fails WITHOUT gpuscope is retried, and only on the signs of that failure; an
assertion about gpuscope's behaviour is never retried. The rates were measured with plain nsys
(no gpuscope code in the recording) by ``python -m tests.nsys_read.measure_flaky``; the figures
are in docs/TESTS.md.

Every retry is a warning (``NsysRetry``, in pytest's warnings summary, attributed to the test)
and a line in the terminal summary section "nsys steps retried", so a run that needed retries
says so; under pytest-xdist each worker hands its retries to the controller, which prints them
all. More than ``RETRY_BUDGET`` retried steps in one run fail the run: nsys is then too unreliable
on this machine for a green run to mean what it says.
"""

from __future__ import annotations

import warnings

import pytest


# words in an nsys tool's output -> the failure they mean, as measured with plain nsys
# (plain nsys, no gpuscope: see docs/TESTS.md for the counts). A hang (a step still running after
# its time limit) is the other failure retried; the helpers recognise it by their own timeout.
KNOWN: dict[str, str] = {
    "Agent launcher failed": "nsys could not start its agent",
    "Failed to connect to Agent": "nsys could not connect to its agent",
    "is canceled because the timeout period is expired": "nsys's agent did not answer in time",
    "Local Endpoint is not available": "nsys could not reach its agent",
    # gpuscope's own hang guard (runs/recorders/nsys_recording.py): the hang class, seen by gpuscope
    "after the program ended (hung)": "nsys hung after the program ended (gpuscope's guard stopped it)",
}
# "Connection to Agent lost" and the importer's "AnalysisFailed" are not retried: they were only
# ever seen while gpuscope recorded a fork pool, never with plain nsys (docs/TESTS.md).
RETRY_BUDGET = 3
WORKER_KEY = "gpuscope_nsys_retried"   # config.workeroutput key: an xdist worker's retries
RETRIED: list[str] = []


def known_flake(output: str) -> str | None:
    """The known nsys failure that ``output`` (an nsys tool's output) shows, or None."""
    for words, meaning in KNOWN.items():
        if words in output:
            return f"{meaning} ({words!r})"
    return None


class NsysRetry(UserWarning):
    """An nsys step failed on its own and was run again."""


def note_retry(step: str, why: str) -> None:
    """Say that ``step`` is run again because of ``why`` (a known nsys failure)."""
    line = f"{step}: {why}; running it again"
    RETRIED.append(line)
    warnings.warn(NsysRetry(line), stacklevel=2)


def over_budget() -> bool:
    return len(RETRIED) > RETRY_BUDGET


def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:   # an xdist worker: the controller counts and reports
        workeroutput[WORKER_KEY] = list(RETRIED)
    elif over_budget() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller: an xdist worker is done; take the retries it saw."""
    RETRIED.extend(getattr(node, "workeroutput", {}).get(WORKER_KEY, []))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not RETRIED:
        return
    over = f" (over the budget of {RETRY_BUDGET}: the run fails)" if over_budget() else ""
    terminalreporter.write_sep("-", f"nsys steps retried: {len(RETRIED)}{over}")
    for line in RETRIED:
        terminalreporter.write_line(line)

