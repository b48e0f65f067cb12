"""`gpuscope report` on bad input: one line on stderr, no traceback, exit status != 0."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsysrec import require_installs


def report(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuscope", "report", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpuscope: error: "), lines[0]
    for w in words:
        assert w in lines[0], lines[0]


def test_missing_file(tmp_path, run_env):
    assert_one_line_error(report([str(tmp_path / "nope.sqlite")], run_env), "no such file")


def test_missing_rep(tmp_path, run_env):
    assert_one_line_error(report([str(tmp_path / "nope.nsys-rep")], run_env), "no such file")


def test_text_file(tmp_path, run_env):
    p = tmp_path / "notes.sqlite"
    p.write_text("just some text\n")
    assert_one_line_error(report([str(p)], run_env), "not an SQLite file")


def test_random_sqlite(tmp_path, run_env):
    p = tmp_path / "other.sqlite"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE t (a INTEGER)")
    conn.commit()
    conn.close()
    assert_one_line_error(report([str(p)], run_env), "not an Nsight Systems export")


def _real_export(tmp_path: Path) -> Path:
    """An nsys-shaped export, large enough that cutting it in half loses table pages."""
    from test_units import make_export

    p = make_export(tmp_path / "real.sqlite")
    conn = sqlite3.connect(p)
    conn.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId)"
                     " VALUES (?, ?, 59, ?, 0, 0)", [(i, i + 5, (10 << 24) | 10) for i in range(20000)])
    conn.commit()
    conn.close()
    return p


def test_truncated_sqlite(tmp_path, run_env):
    src = _real_export(tmp_path)
    data = src.read_bytes()
    p = tmp_path / "truncated.sqlite"
    p.write_bytes(data[: len(data) // 2])
    assert_one_line_error(report([str(p)], run_env))


def test_corrupt_sqlite(tmp_path, run_env):
    src = _real_export(tmp_path)
    data = bytearray(src.read_bytes())
    data[100:4096] = os.urandom(3996)          # smash the schema page, keep the header
    p = tmp_path / "corrupt.sqlite"
    p.write_bytes(bytes(data))
    assert_one_line_error(report([str(p)], run_env))


def test_export_without_nvtx(tmp_path, run_env):
    from test_units import make_export

    p = make_export(tmp_path / "osrt_only.sqlite", nvtx=False)
    assert_one_line_error(report([str(p)], run_env), "no NVTX")


def test_rep_without_nsys(tmp_path, run_env):
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    env = dict(run_env, PATH="/usr/bin:/bin", GPUSCOPE_CACHE=str(tmp_path / "nocache"))
    env.pop("GPUSCOPE_NSYS", None)
    assert_one_line_error(report([str(rep)], env), "Nsight Systems")


@pytest.mark.nsys
def test_rep_that_is_not_a_report(tmp_path, run_env):
    """A garbage .nsys-rep with nsys present: nsys export fails, the user gets one line."""
    require_installs()
    rep = tmp_path / "junk.nsys-rep"
    rep.write_bytes(os.urandom(4096))
    assert_one_line_error(report([str(rep)], run_env), "nsys export failed")


def test_unknown_run_id(run_env):
    assert_one_line_error(report(["--run", "20990101-000000-zzzz"], run_env), "no run")


def test_folder_without_anything(tmp_path, run_env):
    assert_one_line_error(report([str(tmp_path)], run_env), "no nsys export")


def test_unwritable_perfetto(tmp_path, run_env):
    from test_units import make_export

    p = make_export(tmp_path / "ok.sqlite")
    assert_one_line_error(report([str(p), "--perfetto", str(tmp_path / "no" / "dir" / "x.json")], run_env),
                          "cannot write")



@pytest.mark.parametrize("damage", ["no-pid", "rank-text", "list", "clock-end-offset"])
def test_damaged_node_record(tmp_path, run_env, damage):
    """A job folder whose node.json is valid JSON but not what the node recorder writes."""
    import json

    from tests.runs.jobfolder import make_job

    job = make_job(tmp_path / "job", nnodes=2, nproc=1, steps=3)
    meta_file = sorted(job.glob("*/node.json"))[1]
    meta = json.loads(meta_file.read_text())
    if damage == "no-pid":
        del meta["processes"][1]["pid"]
    elif damage == "rank-text":
        meta["processes"][1]["rank"] = "one"
    elif damage == "list":
        meta = [meta]
    else:
        del meta["clock_end"]["offset_ns"]
    meta_file.write_text(json.dumps(meta))
    assert_one_line_error(report([str(job)], run_env), str(meta_file), "not a node record")


def test_a_damaged_export_of_a_rep_names_the_rep_first():
    """The user gave the .nsys-rep: the line starts with it, then names the export that failed."""
    from pathlib import Path

    from gpuscope.errors import UserError
    from gpuscope.nsys.report import named_for

    rep, export = Path("/data/run.nsys-rep"), Path("/data/run.sqlite")
    line = str(named_for(rep, export, UserError(f"{export}: unreadable SQLite file (x); is it corrupt?")))
    assert line == "/data/run.nsys-rep: its export run.sqlite: unreadable SQLite file (x); is it corrupt?"
    other = UserError("nsys export failed")
    assert named_for(rep, export, other) is other and named_for(export, export, other) is other
