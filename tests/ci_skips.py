"""Under ``CI=true`` a skipped test is a failed test, unless it is on ``ALLOWED`` with its reason.

A CI run is green only when every behaviour was checked: a missing torch, nsys build or subreaper
must not turn tests into silent skips there. The hooks below are imported by tests/conftest.py
(and can be loaded alone with ``-p tests.ci_skips``, as tests/test_ci_skips.py does).

This is the ONE allow-list. An entry is (node id prefix, words of the skip reason) -> why a CI
machine may legitimately be unable to run that test.
"""

from __future__ import annotations

import os

import pytest

ALLOWED: dict[tuple[str, str], str] = {
    ("tests/telemetry/test_telemetry_gpu.py::test_real_pynvml_here_has_no_gpu", "a GPU is present"):
        "checks what the real pynvml says on a machine WITHOUT a GPU; a GPU machine cannot run it",
    ("tests/cleanup/test_safety.py::", "needs root to start a process as another user"):
        "starting a process as uid 65534 needs root; a CI job that is not root cannot make one",
}
SKIPPED_IN_CI = "skipped under CI=true and not on the allow-list (tests/ci_skips.py ALLOWED)"
WORKER_KEY = "gpuscope_allowed_skips"   # config.workeroutput key: an xdist worker's allowed skips
# (node id, reason) of each allowed skip; a dict keeps one entry for a module every xdist worker collects
_allowed_seen: dict[tuple[str, str], None] = {}


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def skip_reason(report) -> str:
    """The reason text of a skipped test or collection report."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def allowed(nodeid: str, reason: str) -> str | None:
    """Why this skip is allowed under CI, or None."""
    for (prefix, words), why in ALLOWED.items():
        if nodeid.startswith(prefix) and words in reason:
            return why
    return None


def _enforce(report) -> None:
    if not (in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if allowed(report.nodeid, reason) is not None:
        _allowed_seen[(report.nodeid, reason)] = None
        return
    report.outcome = "failed"
    report.longrepr = f"{SKIPPED_IN_CI}: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _enforce(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _enforce(outcome.get_result())   # a module-level importorskip / pytest.skip(allow_module_level)


def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:   # an xdist worker: the controller counts and reports
        workeroutput[WORKER_KEY] = [list(k) for k in _allowed_seen]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller: an xdist worker is done; take the allowed skips it saw."""
    for nodeid, reason in getattr(node, "workeroutput", {}).get(WORKER_KEY, []):
        _allowed_seen[(nodeid, reason)] = None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if in_ci() and not hasattr(config, "workerinput"):
        terminalreporter.write_sep("-", f"CI=true: {len(_allowed_seen)} skip(s) on the allow-list")
        for nodeid, reason in _allowed_seen:
            terminalreporter.write_line(f"{nodeid}: {reason}")
