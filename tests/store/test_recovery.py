"""A damaged run store is moved aside and rebuilt from the run folders (issue 15.3).

Real damage on real files: random bytes over the header, random bytes over the pages after it, a
text file in the store's place, and damage made while a run is in progress (found by another
gpuscope command, or by the run itself when it records its end).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.store.util import (GATED, PY, QUICK, damage_bytes, damaged_copies, gpuscope, history, quick_check,
                              store_of, wait_for, write_script)


def _assert_recovered(home: Path, res: subprocess.CompletedProcess, expect_ids: set[str]) -> list[dict]:
    copies = damaged_copies(home)
    assert len(copies) == 1, copies
    notes = [line for line in res.stderr.splitlines() if "was damaged" in line]
    assert len(notes) == 1 and str(copies[0]) in notes[0], res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert quick_check(store_of(home)) == "ok"
    _, rows = history_rows(home, res)
    assert expect_ids <= {r["id"] for r in rows}
    return rows


def history_rows(home: Path, res: subprocess.CompletedProcess) -> tuple[subprocess.CompletedProcess, list[dict]]:
    rows = json.loads(res.stdout) if res.stdout.lstrip().startswith("[") else None
    return res, rows if rows is not None else []


def _ids(home: Path) -> set[str]:
    return {p.name for p in (home / "runs").iterdir()}


def test_random_bytes_over_the_header(two_runs, run_env):
    ids = _ids(two_runs)
    damage_bytes(store_of(two_runs), 0, 4096)
    assert quick_check(store_of(two_runs)) != "ok"
    res = gpuscope(run_env, "history", "--json")
    assert res.returncode == 0, res.stderr
    rows = _assert_recovered(two_runs, res, ids)
    by_id = {r["id"]: r for r in rows}
    for run_id in ids:
        assert by_id[run_id]["status"] == "exited" and by_id[run_id]["exit_code"] == 0
        assert by_id[run_id]["summary"]["processes"], by_id[run_id]


def test_random_bytes_over_the_pages_after_the_header(two_runs, run_env):
    ids = _ids(two_runs)
    store = store_of(two_runs)
    damage_bytes(store, 4096, 8192)
    assert quick_check(store) != "ok"
    res = gpuscope(run_env, "history", "--json")
    assert res.returncode == 0, res.stderr
    _assert_recovered(two_runs, res, ids)
    one = gpuscope(run_env, "history", sorted(ids)[0])
    assert one.returncode == 0 and "exited" in one.stdout and "main" in one.stdout, one.stdout + one.stderr


def test_run_with_a_text_file_in_place_of_the_store(two_runs, run_env, tmp_path):
    ids = _ids(two_runs)
    store = store_of(two_runs)
    store.write_text("this is not a database\n" * 200)
    script = write_script(tmp_path, "quick.py", QUICK)
    res = gpuscope(run_env, "run", str(script), "third")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "quick ['third']" in res.stdout
    assert damaged_copies(two_runs)[0].read_text().startswith("this is not a database")
    new_ids = _ids(two_runs) - ids
    assert len(new_ids) == 1
    listing = gpuscope(run_env, "history", "--json")
    _assert_recovered(two_runs, subprocess.CompletedProcess(listing.args, 0, listing.stdout, res.stderr),
                      ids | new_ids)
    rows = {r["id"]: r for r in json.loads(listing.stdout)}
    assert rows[new_ids.pop()]["status"] == "exited"


def _start_gated(run_env, tmp_path) -> tuple[subprocess.Popen, Path]:
    gate = tmp_path / "gate"
    gate.mkdir()
    script = write_script(tmp_path, "gated.py", GATED)
    proc = subprocess.Popen([PY, "-m", "gpuscope", "run", str(script), str(gate)], env=run_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(gate / "started")
    return proc, gate


def _until_listed(run_env, run_ids: set[str], timeout_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        res = gpuscope(run_env, "history", "--json")
        if res.returncode == 0 and run_ids <= {r["id"] for r in json.loads(res.stdout)}:
            return
        time.sleep(0.05)
    raise AssertionError(f"{run_ids} not in the store after {timeout_s:.0f} s")


def _finish_gated(proc: subprocess.Popen, gate: Path) -> tuple[str, str]:
    (gate / "go").touch()
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out + err
    assert "gated done" in out
    return out, err


@pytest.mark.parametrize("finder", ["another gpuscope", "the run itself"])
def test_damage_found_mid_run(two_runs, run_env, tmp_path, finder):
    ids = _ids(two_runs)
    proc, gate = _start_gated(run_env, tmp_path)
    try:
        running = _ids(two_runs) - ids
        _until_listed(run_env, running)   # its row and spec.json come just after the program starts
        damage_bytes(store_of(two_runs), 0, 4096)
        if finder == "another gpuscope":
            res = gpuscope(run_env, "history", "--json")
            assert res.returncode == 0, res.stderr
            assert len(damaged_copies(two_runs)) == 1
            listed = {r["id"]: r for r in json.loads(res.stdout)}
            assert ids | running <= set(listed)
    finally:
        out, err = _finish_gated(proc, gate)
    assert "Traceback" not in err, err
    copies = damaged_copies(two_runs)
    assert len(copies) == 1, copies     # the run followed the rebuilt store, it did not move it again
    assert quick_check(store_of(two_runs)) == "ok"
    _, rows = history(run_env)
    by_id = {r["id"]: r for r in rows}
    (run_id,) = running
    assert by_id[run_id]["status"] == "exited" and by_id[run_id]["exit_code"] == 0, by_id[run_id]
    assert ids <= set(by_id)


def test_concurrent_commands_move_the_store_aside_once(two_runs, run_env):
    ids = _ids(two_runs)
    damage_bytes(store_of(two_runs), 0, 4096)
    procs = [subprocess.Popen([PY, "-m", "gpuscope", "history", "--json"], env=run_env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(5)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len(damaged_copies(two_runs)) == 1
    # none of them saw an empty store (the new one is built beside the old one and renamed into place)
    for out, _err in outs:
        assert ids <= {r["id"] for r in json.loads(out)}
    assert not list(two_runs.glob("*.rebuilding*"))
    assert sum("was damaged" in err for _out, err in outs) == 1, outs


def test_folder_without_summary_is_listed_as_error(two_runs, run_env):
    ids = sorted(_ids(two_runs))
    (two_runs / "runs" / ids[0] / "summary.json").unlink()
    damage_bytes(store_of(two_runs), 0, 4096)
    _, rows = history(run_env)
    by_id = {r["id"]: r for r in rows}
    assert by_id[ids[0]]["status"] == "error" and "summary.json" in by_id[ids[0]]["error"]
    assert by_id[ids[1]]["status"] == "exited"


def test_salvage_keeps_readable_tables(two_runs, run_env):
    """Damage past the end of the tables' pages is found by quick_check; what reads whole is copied."""
    import sqlite3
    from contextlib import closing

    store = store_of(two_runs)
    with closing(sqlite3.connect(store)) as conn:
        before = conn.execute("SELECT count(*) FROM sample_proc").fetchone()[0]
        conn.execute("CREATE TABLE filler (x BLOB)")
        conn.execute("INSERT INTO filler VALUES (zeroblob(65536))")
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert before > 0
    damage_bytes(store, (pages - 4) * size, 2 * size)   # inside the filler's overflow pages
    from gpuscope.store import db, recovery

    conn = db.connect()
    assert conn.recovered == [] and recovery.check(store) is not None   # not found until looked for
    done = recovery.recover(store, seen_inode=recovery.inode(store), problem="test")
    assert done is not None and "sample_proc" in done.salvaged and "runs" in done.salvaged
    with closing(sqlite3.connect(store)) as fresh:
        assert fresh.execute("SELECT count(*) FROM sample_proc").fetchone()[0] == before
