"""Retries of nsys steps that fail on their own, measured, and reported in the test output.

Only a step that fails WITHOUT gpuscope is retried, and only on the signs of that failure; an
assertion about gpuscope's behaviour is never retried. The rates were measured with plain nsys
(no gpuscope code in the recording) by ``python -m tests.nsys_read.measure_flaky``; the figures
are in ``MEASURED`` and in docs/dev/TESTS-FLAKY.md.

Every retry is a warning (``NsysRetry``, in pytest's warnings summary, attributed to the test)
and a line in the terminal summary section "nsys steps retried", so a run that needed retries
says so.
"""

from __future__ import annotations

import warnings

import pytest

# kind -> what was measured with plain nsys (see the module docstring)
MEASURED: dict[str, str] = {}
RETRIED: list[str] = []


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

