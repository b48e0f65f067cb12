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


def pytest_configure(config):
    for plugin in (ci_skips, flaky):
        if not config.pluginmanager.is_registered(plugin):
            config.pluginmanager.register(plugin, plugin.__name__)


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
