"""Qt app tests: offscreen Qt, a temporary settings file, and no leftover threads or processes.

Kept minimal on purpose: the report/timeline and cleanup tests share this file.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")   # before any Qt import

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # apphelpers.py

import pytest
from apphelpers import processes_with_env


@pytest.fixture(autouse=True)
def app_settings(tmp_path, monkeypatch):
    """Each test gets its own settings file (never the user's)."""
    path = tmp_path / "settings.ini"
    monkeypatch.setenv("GPUSCOPE_APP_SETTINGS", str(path))
    return path


@pytest.fixture(autouse=True)
def no_leftovers(gpuscope_home, request):
    """Fail a test that leaves pool threads busy or processes of its runs alive."""
    yield
    from PySide6.QtCore import QThreadPool

    from gpuscope.app import workers

    busy = not workers.wait_all(15_000) or not QThreadPool.globalInstance().waitForDone(5_000)
    marker = f"GPUSCOPE_HOME={gpuscope_home}".encode()
    deadline = time.monotonic() + 5.0
    left = processes_with_env(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_with_env(marker)
    for pid in left:   # do not let one test's leftovers break the next ones
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not busy, "a test left worker threads running"
    assert not left, f"a test left processes running: {left}"
