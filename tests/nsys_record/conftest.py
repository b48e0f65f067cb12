"""Fixtures for recording with the real, provisioned Nsight Systems builds.

The builds come from ``scripts/provision_nsys.py`` (``<cache>/nsys/<version>``). When none is there
the tests are skipped with a reason on a developer machine and FAIL under CI (``CI=true``), so a CI
that forgot to provision cannot pass by skipping.
"""

from __future__ import annotations

import pytest

from gpuscope.nsys import locate
from tests.nsys_record.helpers import LAUNCHED, missing


@pytest.fixture(scope="session")
def provisioned() -> dict[str, locate.NsysInstall]:
    """release ("2022.4") -> install, for every provisioned build."""
    found = {}
    for d in locate.provisioned_dirs():
        inst = locate.install_at(d / locate.DEBIAN_TARGET / "nsys", "cache")
        if inst:
            found[inst.release] = inst
    if not found:
        missing(f"no provisioned Nsight Systems under {locate.cache_dir() / 'nsys'}")
    return found


@pytest.fixture(scope="session")
def newest(provisioned) -> locate.NsysInstall:
    return provisioned[max(provisioned, key=lambda k: provisioned[k].version_tuple)]


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_nsys():
    """Stop every nsys (and its agent) that a test of this folder started, whatever happened."""
    yield
    for session in LAUNCHED:
        session.kill(grace_s=0.5)
