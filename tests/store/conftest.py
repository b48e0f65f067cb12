"""Fixtures: a data directory holding two real, finished runs (made once, copied per test)."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.store.util import QUICK, gpuscope, write_script


@pytest.fixture(scope="module")
def two_runs_template(tmp_path_factory, run_env_module) -> Path:
    home = Path(run_env_module["GPUSCOPE_HOME"])
    work = tmp_path_factory.mktemp("scripts")
    # QUICK, then half a second more: the 10 Hz sampler stores a few process samples of each run
    # (a run that ends within milliseconds on a fast machine leaves none, and the store tests
    # need some in every table)
    script = write_script(work, "quick.py", QUICK + "import time; time.sleep(0.5)\n")
    for arg in ("first", "second"):
        res = gpuscope(run_env_module, "run", str(script), arg)
        assert res.returncode == 0, res.stdout + res.stderr
    return home


@pytest.fixture(scope="module")
def run_env_module(tmp_path_factory) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["GPUSCOPE_HOME"] = str(tmp_path_factory.mktemp("template_home"))
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture
def two_runs(two_runs_template, gpuscope_home, run_env) -> Path:
    """The test's own data directory (GPUSCOPE_HOME) with the two runs' folders and store."""
    shutil.copytree(two_runs_template, gpuscope_home, dirs_exist_ok=True)
    with closing(sqlite3.connect(gpuscope_home / "gpuscope.sqlite")) as conn, conn:
        conn.execute("UPDATE runs SET run_dir=replace(run_dir, ?, ?)", (str(two_runs_template), str(gpuscope_home)))
    return gpuscope_home
