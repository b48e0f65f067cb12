"""Shared by the injection's tests: a bare virtualenv of this Python, a run's environment without a run."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope import rundir


def make_bare_python(folder: Path) -> str:
    """A virtualenv of this Python in ``folder`` with nothing in its site (this one's editable
    install imports importlib, functools and more at every start, and the machine's own CPython
    may have .pth files that do too): it sees this virtualenv's packages through a path line only.
    Returns its ``python``."""
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(folder)],
                   check=True, timeout=120)
    site = next(p for p in sys.path if p.endswith("site-packages"))
    Path(site_packages(folder), "00-packages.pth").write_text(site + "\n")
    return str(folder / "bin" / "python")


def site_packages(folder: Path) -> str:
    return glob.glob(str(folder / "lib" / "python*" / "site-packages"))[0]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    return make_bare_python(tmp_path_factory.mktemp("bare"))


def injected_env(run_dir: Path, boot: str | None = None, **extra: str) -> dict[str, str]:
    """The variables a run's processes get (gpuscope.runs.launcher), without a run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}
    env.update({"PYTHONPATH": boot or rundir.boot_dir(), "GPUSCOPE_RUN_DIR": str(run_dir), "GPUSCOPE_RUN_ID": "test",
                "GPUSCOPE_SCRIPT": "/nonexistent/script.py", "GPUSCOPE_START_METHOD": "default",
                **extra})
    return env
