"""Deleting and pruning runs through the CLI (issue 15.5), and private run data (issue 15.10)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from contextlib import closing

from gpuscope.paths import PRIVATE_MARK, PRIVATE_VERSION
from tests.fresh_python import fresh_json
from tests.store.util import gpuscope, store_of


def _ids(home):
    return sorted(p.name for p in (home / "runs").iterdir())


def test_delete_two_and_unknown_id(two_runs, run_env):
    ids = _ids(two_runs)
    bad = gpuscope(run_env, "history", "--delete", ids[0], "--delete", "nope")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "'nope'" in bad.stderr
    assert _ids(two_runs) == ids                           # nothing deleted on an error
    res = gpuscope(run_env, "history", "--json", "--delete", ids[0], "--delete", ids[1])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert sorted(r["run_id"] for r in out["runs"]) == ids and out["bytes"] > 0
    assert _ids(two_runs) == []
    with closing(sqlite3.connect(store_of(two_runs))) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM run_processes").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM sample_proc").fetchone()[0] == 0


def test_prune_keep_and_older_than(two_runs, run_env):
    ids = _ids(two_runs)
    with closing(sqlite3.connect(store_of(two_runs))) as conn, conn:
        conn.execute("UPDATE runs SET created_ns=? WHERE id=?", (time.time_ns() - 10 * 86_400 * 10**9, ids[0]))
    dry = gpuscope(run_env, "history", "--prune", "--keep", "1", "--dry-run")
    assert "would delete 1 run(s)" in dry.stdout and _ids(two_runs) == ids
    assert "deleted 0 run(s)" in gpuscope(run_env, "history", "--older-than", "30").stdout
    res = gpuscope(run_env, "history", "--older-than", "5")
    assert res.returncode == 0 and _ids(two_runs) == [ids[1]], res.stdout + res.stderr
    res = gpuscope(run_env, "history", "--prune", "--keep", "0")
    assert res.returncode == 0 and _ids(two_runs) == []


def test_a_running_run_is_never_deleted(two_runs, run_env):
    from gpuscope.store import db, runs

    with db.connect() as conn:     # a run whose supervisor is this live test process
        runs.insert_run(conn, run_id="20990101-000000-live0000", run_dir=str(two_runs / "runs" / "x"),
                        spec={"script": "s.py", "launcher": "python", "start_method": "fork"}, versions={})
    res = gpuscope(run_env, "history", "--delete", "20990101-000000-live0000")
    assert res.returncode == 2 and "still running" in res.stderr
    res = gpuscope(run_env, "history", "--prune", "--keep", "0", "--json")
    assert [r["run_id"] for r in json.loads(res.stdout)["runs"]] != [] and \
        "20990101-000000-live0000" not in res.stdout


def test_listing_shows_disk_use(two_runs, run_env):
    res = gpuscope(run_env, "history")
    assert res.returncode == 0 and "DISK" in res.stdout and "in run folders" in res.stdout
    rows = json.loads(gpuscope(run_env, "history", "--json").stdout)
    assert all(r["disk_bytes"] > 0 for r in rows)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_run_data_is_private(two_runs, run_env, tmp_path):
    """Runs recorded by a version before the walk (no .private mark) with loose modes are closed by the
    next command; the mark then says it was done."""
    assert (two_runs / PRIVATE_MARK).read_text() == PRIVATE_VERSION + "\n"
    (two_runs / PRIVATE_MARK).unlink()       # as a data folder an older gpuscope wrote
    os.chmod(two_runs, 0o755)
    loose = two_runs / "runs" / _ids(two_runs)[0] / "stdout.log"
    os.chmod(loose, 0o644)
    os.chmod(loose.parent, 0o755)
    script = tmp_path / "q.py"
    script.write_text("print('x')\n")
    old = os.umask(0o022)
    try:
        res = gpuscope(run_env, "run", str(script))
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr
    assert _mode(two_runs) == 0o700 and _mode(loose.parent) == 0o700 and _mode(loose) == 0o600
    for root, dirs, files in os.walk(two_runs):
        assert _mode(root) == 0o700, root
        for f in files:
            if not f.endswith(".lock"):
                assert _mode(os.path.join(root, f)) & 0o077 == 0, os.path.join(root, f)
    assert (two_runs / PRIVATE_MARK).read_text() == PRIVATE_VERSION + "\n"


WALKS = """
import json, os, sys
from gpuscope import paths
walks = []
real = paths.make_private
paths.make_private = lambda top: walks.append(os.fspath(top)) or real(top)
paths.data_dir()
paths._tightened.clear()    # as the next command, in a new process
paths.data_dir()
print(json.dumps(walks))
"""


def test_the_data_folder_is_walked_once_not_by_every_command(gpuscope_home, run_env):
    """The walk reads every file of every run: done when the folder has no mark, then not again
    (a thousand runs made every command 0.1-0.2 s slower)."""
    walks = fresh_json(WALKS, env=run_env)
    assert walks == [str(gpuscope_home)]
    assert fresh_json(WALKS, env=run_env) == []
    (gpuscope_home / PRIVATE_MARK).write_text("0\n")     # a mark from a walk that covered less
    assert fresh_json(WALKS, env=run_env) == [str(gpuscope_home)]
