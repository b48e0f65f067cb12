"""db.hold_until_exit / db.release (issue 14.4): ``gpuscope run``, which ends by ``os._exit``, leaves
its last store connection open instead of paying the close's checkpoint and sync; what it
committed stays in the WAL, where the next connection reads it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from tests.fresh_python import REPO

WRITER = """
import os, sys
from gpuscope.store import db
conn = db.connect(sys.argv[1])
if sys.argv[2] == "hold":
    db.hold_until_exit()
with conn:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE IF NOT EXISTS probe (id TEXT, status TEXT)")
    conn.execute("INSERT INTO probe VALUES ('r1', 'exited')")
db.release(conn)
sys.stdout.flush()
os._exit(0)
"""


def _write(path, mode: str) -> None:
    out = subprocess.run([sys.executable, "-c", WRITER, str(path), mode], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr


def _status(path, table: str = "probe") -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT id, status FROM {table}").fetchall()
    finally:
        conn.close()


def test_a_held_connection_leaves_its_commits_in_the_wal_for_the_next_reader(tmp_path):
    path = tmp_path / "store.sqlite"
    _write(path, "hold")
    wal = tmp_path / "store.sqlite-wal"
    assert wal.exists() and wal.stat().st_size > 0        # not checkpointed at os._exit
    assert _status(path) == [("r1", "exited")]             # and read back from the WAL
    assert not wal.exists()                                # the reader's last close checkpointed it


def test_a_released_connection_is_closed_otherwise(tmp_path):
    path = tmp_path / "store.sqlite"
    _write(path, "close")
    assert not (tmp_path / "store.sqlite-wal").exists()    # the last close checkpointed and removed it
    assert _status(path) == [("r1", "exited")]


def test_gpuscope_run_as_a_program_holds_and_in_process_closes(tmp_path, gpuscope_home):
    """The ``gpuscope`` program leaves the WAL; the same command called in-process (the app, tests)
    closes its connection: nothing is held in a process that goes on."""
    script = tmp_path / "hello.py"
    script.write_text("print('hi')\n")
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", str(script)], capture_output=True,
                         text=True, timeout=120, env=env, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    store = next((tmp_path / "home").rglob("*.sqlite"))
    assert store.with_name(store.name + "-wal").exists()
    assert [s for _, s in _status(store, "runs")] == ["exited"]

    from gpuscope import cli
    from gpuscope.store import db

    assert cli._main(["run", "--quiet", str(script)], []) == 0
    assert db._held is None
