"""The SYNTHETIC exports' tables have the columns of real exports (``--lazy=false``) of each nsys."""

from __future__ import annotations

import sqlite3
import sys

import pytest

from tests.gpu import synthetic_export as sx
from tests.nsys_read.nsysrec import kill_tagged, record, require_installs, run_nsys
from tests.nsys_versions import VERSIONS

pytestmark = pytest.mark.nsys

PROGRAM = [sys.executable, "-c", "import nvtx\nwith nvtx.annotate('a'):\n    pass"]


@pytest.mark.parametrize("key", VERSIONS)
def test_synthetic_tables_have_the_real_columns(key, tmp_path):
    inst = require_installs((key,))[key]
    try:
        sqlite = record(inst, tmp_path, "tiny", [], program=PROGRAM)
        full = tmp_path / "full.sqlite"
        run_nsys([inst.nsys, "export", "--type", "sqlite", "--lazy=false", "-f", "true", "-o", full,
                  sqlite.with_suffix(".nsys-rep")], cwd=tmp_path)
    finally:
        kill_tagged()
    real = sqlite3.connect(full)
    ours = sqlite3.connect(sx.write(tmp_path / "ours.sqlite", sx.Export(), key))
    try:
        for table, cols in sx.table_info(key).items():
            theirs = [tuple(r[1:4]) + (r[5],) for r in real.execute(f"PRAGMA table_info({table})")]
            assert cols == theirs, table
            assert [tuple(r[1:4]) + (r[5],) for r in ours.execute(f"PRAGMA table_info({table})")] == theirs
        version = "EXPORT_META_DATA" if key == "2022.4" else "META_DATA_EXPORT"
        meta = dict(real.execute(f"SELECT name, value FROM {version}"))
        assert (meta["EXPORT_PRODUCT_VERSION"], meta["EXPORT_SCHEMA_VERSION"]) == sx.VERSIONS[key]
    finally:
        real.close()
        ours.close()
