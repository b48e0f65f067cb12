"""Retries of nsys steps that fail on their own, measured, and reported in the test output.

Only a step that fails WITHOUT gpuscope is retried, and only on the signs of that failure; an
assertion about gpuscope's behaviour is never retried. The rates were measured with plain nsys
(no gpuscope code in the recording) by ``python -m tests.nsys_read.measure_flaky``; the figures
are in docs/TESTS.md.

Every retry is a warning (``NsysRetry``, in pytest's warnings summary, attributed to the test)
and a line in the terminal summary section "nsys steps retried", so a run that needed retries
says so.
"""

from __future__ import annotations

import warnings


# words in an nsys tool's output -> the failure they mean, as measured with plain nsys
# (plain nsys, no gpuscope: see docs/TESTS.md for the counts). A hang (a step still running after
# its time limit) is the other failure retried; the helpers recognise it by their own timeout.
KNOWN: dict[str, str] = {
    "Agent launcher failed": "nsys could not start its agent",
    "Failed to connect to Agent": "nsys could not connect to its agent",
    "is canceled because the timeout period is expired": "nsys's agent did not answer in time",
    "Local Endpoint is not available": "nsys could not reach its agent",
    "Connection to Agent lost": "nsys lost its agent",
    "AnalysisFailed": "QdstrmImporter failed to analyse the capture",
}
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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if RETRIED:
        terminalreporter.write_sep("-", f"nsys steps retried: {len(RETRIED)}")
        for line in RETRIED:
            terminalreporter.write_line(line)

