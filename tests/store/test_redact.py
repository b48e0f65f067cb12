"""``gpuscope report --redact``: a real nsys export without the program's environment (issue 15.10)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest

from gpuscope.nsys import locate
from tests.nsys_record.helpers import NVTX_SCRIPT, nsys_machine_lock, record_script

SECRET = "gpuscope-test-token-5f3a9c"
pytestmark = pytest.mark.nsys


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    found = locate.provisioned_installs()
    if not found:
        pytest.fail("no provisioned Nsight Systems (run scripts/provision_nsys.py)")
    inst = found[max(found, key=lambda k: found[k].version_tuple)]
    import os

    os.environ["GPUSCOPE_TEST_SECRET"] = SECRET
    try:
        with nsys_machine_lock():
            _session, result, output = record_script(inst, tmp_path_factory.mktemp("redact"), NVTX_SCRIPT)
    finally:
        os.environ.pop("GPUSCOPE_TEST_SECRET", None)
    assert result.sqlite_path is not None and result.sqlite_path.exists(), output
    return result.sqlite_path


def test_the_export_holds_the_environment_and_the_copy_does_not(export, tmp_path, run_env):
    assert SECRET.encode() in export.read_bytes()      # what nsys stores (the reason for --redact)
    with closing(sqlite3.connect(export)) as conn:
        assert conn.execute("SELECT count(*) FROM META_DATA_CAPTURE WHERE value LIKE ?",
                            (f"%{SECRET}%",)).fetchone()[0] >= 1
        assert conn.execute("SELECT count(*) FROM TARGET_INFO_SYSTEM_ENV WHERE value LIKE ?",
                            (f"%{SECRET}%",)).fetchone()[0] >= 1
        ranges = conn.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
    out = tmp_path / "shared.sqlite"
    res = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--redact", str(out), str(export)],
                         env=run_env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert SECRET.encode() not in out.read_bytes()
    assert b"GPUSCOPE_HOME=" not in out.read_bytes() and b"PATH=" not in out.read_bytes()
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    with closing(sqlite3.connect(out)) as conn:
        assert conn.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0] == ranges
    shown = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--json", "--no-cache", str(out)],
                           env=run_env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and '"nvtx_ranges"' in shown.stdout, shown.stderr


def test_a_nsys_rep_alone_is_refused_with_one_line(tmp_path, run_env):
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"\0" * 64)
    res = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--redact", str(tmp_path / "o.sqlite"),
                          str(rep)], env=run_env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "cannot be redacted" in res.stderr and len(res.stderr.splitlines()) == 1
