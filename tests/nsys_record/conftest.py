"""Fixtures for recording with the real, provisioned Nsight Systems builds.

The builds come from ``scripts/provision_nsys.py`` (``<cache>/nsys/<version>``). When none is there
the tests are skipped with a reason on a developer machine and FAIL under CI (``CI=true``), so a CI
that forgot to provision cannot pass by skipping.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.nsys import locate
from tests.nsys_record.helpers import LAUNCHED, missing, nsys_machine_lock


@pytest.fixture(scope="session")
def provisioned() -> dict[str, locate.NsysInstall]:
    """release ("2022.4") -> install, for every provisioned build."""
    found = locate.provisioned_installs()
    if not found:
        missing(f"no provisioned Nsight Systems under {locate.cache_dir() / 'nsys'}")
    return found


@pytest.fixture(scope="session")
def newest(provisioned) -> locate.NsysInstall:
    return provisioned[max(provisioned, key=lambda k: provisioned[k].version_tuple)]


@pytest.fixture(autouse=True)
def _one_recording_at_a_time(request):
    """Hold gpuscope's machine-wide nsys lock during each test that records; not around the doctor
    tests, whose `gpuscope doctor` subprocess takes the lock itself, nor the locate tests, which
    record nothing."""
    if request.node.get_closest_marker("nsys") is None or request.module.__name__.endswith(("test_doctor",
                                                                                          "test_locate")):
        yield
        return
    with nsys_machine_lock():
        yield


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_nsys():
    """Stop every nsys (and its agent) that a test of this folder started, whatever happened."""
    yield
    for session in LAUNCHED:
        session.kill(grace_s=0.5)


@pytest.fixture(scope="session")
def nvtx13_python(tmp_path_factory) -> str:
    """A throwaway venv with nvtx 0.2.13 (payload extension compat id 260); about 5 s."""
    venv = tmp_path_factory.mktemp("nvtx13") / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
        subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "nvtx==0.2.13"], check=True,
                       capture_output=True, timeout=300)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        missing(f"cannot make a venv with nvtx 0.2.13: {exc}")
    return str(venv / "bin/python")
