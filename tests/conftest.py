"""Shared test setup: every test gets its own gpuscope data directory; under ``CI=true`` a skip
not on the allow-list fails (tests/ci_skips.py); nsys retries are reported (tests/flaky.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import ci_skips, flaky

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


SCREENSHOTS = ROOT / "docs" / "screenshots"   # made by scripts/screenshots.py only; no test writes there
_shots_before: dict[str, tuple[int, int]] = {}


def pytest_configure(config):
    for plugin in (ci_skips, flaky):
        if not config.pluginmanager.is_registered(plugin):
            config.pluginmanager.register(plugin, plugin.__name__)
    if not hasattr(config, "workerinput"):   # the controller (or a plain run), not each xdist worker
        _compile_gpuscope()
        _shots_before.update(screenshot_files())


def screenshot_files() -> dict[str, tuple[int, int]]:
    """name -> (size, mtime_ns) of each file in docs/screenshots."""
    try:
        return {e.name: (e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(SCREENSHOTS) if e.is_file()}
    except OSError:
        return {}


def pytest_sessionfinish(session, exitstatus):
    """A test that wrote into docs/screenshots fails the run (they write to a temporary folder)."""
    if hasattr(session.config, "workerinput"):
        return
    changed = sorted(name for name, stat in screenshot_files().items() if _shots_before.get(name) != stat)
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("!", f"docs/screenshots changed during the tests (tests write to a temporary "
                                    f"folder): {', '.join(changed)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _compile_gpuscope() -> None:
    """Byte-compile gpuscope once, as installing a wheel would. The editable install is source
    only, and with PYTHONDONTWRITEBYTECODE=1 (common on CI and shared machines) each of the
    suite's hundreds of `python -m gpuscope` processes would compile it again (~0.5-1 s each on
    a slow machine). Reading the cache is allowed under that setting; only writing is not."""
    import compileall

    compileall.compile_dir(str(ROOT / "gpuscope"), quiet=2)


# Folders whose tests share session-scoped recordings (real nsys, minutes each): one xdist worker
# runs all of a folder's tests, so each recording is made once. Every test marked nsys joins one
# group too (nsys recordings take a machine-wide lock). Elsewhere a file is the unit.
_SHARED_FOLDERS = ("nsys_read", "nsys_record")


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n N --dist loadgroup``, the README's test command) tests of one file
    (or of one folder above) run on one worker: module fixtures are made once, and tests that
    wait on real processes overlap with tests that compute."""
    groups: dict[str, str] = {}
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests")
        group = rel.parts[0] if rel.parts[0] in _SHARED_FOLDERS else rel.as_posix()
        if item.get_closest_marker("nsys"):
            group = "nsys"   # one worker records, in turn: no test waits on another's machine-wide lock
        elif item.get_closest_marker("ray"):
            group = "ray"    # one local Ray cluster at a time: each starts ~10 processes
        groups[item.nodeid] = group
        item.add_marker(pytest.mark.xdist_group(group))
    # Groups with real nsys recordings or torch first: their tests take minutes and nsys ones queue
    # on one machine-wide lock, so started first they overlap with everything else.
    heavy = {groups[i.nodeid] for i in items
             if i.get_closest_marker("nsys") or i.get_closest_marker("torch") or i.get_closest_marker("ray")}
    items.sort(key=lambda i: groups[i.nodeid] not in heavy)


@pytest.fixture(autouse=True)
def gpuscope_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("gshome")
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    return home


@pytest.fixture
def run_env(gpuscope_home):
    """Environment for running `python -m gpuscope` in a subprocess."""
    env = dict(os.environ)
    env["GPUSCOPE_HOME"] = str(gpuscope_home)
    env.pop("PYTHONPATH", None)
    return env
