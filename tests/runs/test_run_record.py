"""The run record: ``open_run`` gives one typed record of a run, by id, prefix or folder, for new
runs, runs without a summary, and folders written before the record existed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gpuscope.errors import UserError
from gpuscope.procs.key import ProcKey
from gpuscope.runrecord import RunRecord, read_folder
from gpuscope.status import ExitStatus, RunStatus
from gpuscope.store import db, rebuild
from gpuscope.store.lookup import find_run, open_run
from gpuscope.store import runs as store_runs
from tests.runs.helpers import gpuscope, script, summary

OLD_RUN = Path(__file__).resolve().parent / "data" / "old_format_run"


def _proc_start_ticks(pid: int) -> int:
    from gpuscope.procs.read import read

    info = read(pid)
    assert info is not None
    return info.start_ticks


@pytest.fixture()
def finished(run_env):
    """A real run of a script whose children exit with several codes (its --json summary)."""
    proc = gpuscope("run", "--json", "-q", script("exit_kinds.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return summary(proc)


def test_open_run_reads_the_record_the_run_printed(finished, gpuscope_home, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_HOME", str(gpuscope_home))
    by_id = open_run(finished["run_id"])
    by_prefix = open_run(finished["run_id"][:-3])
    by_folder = open_run(finished["run_dir"])
    assert by_id == by_prefix == by_folder
    assert isinstance(by_id, RunRecord) and by_id.status is RunStatus.EXITED
    assert by_id.to_json() == finished                      # the one record: what --json printed
    assert by_id.describe() == "exited (exit code 0)"
    assert by_id.spec["script"].endswith("exit_kinds.py") and by_id.versions
    assert by_id.started_ns and by_id.ended_ns > by_id.started_ns
    codes = sorted(str(p.exit_signal or p.exit_code) for p in by_id.processes if p.role == "subprocess")
    assert codes == ["0", "1", "1", "3", "4", "SIGINT"]
    main = next(p for p in by_id.processes if p.role == "main")
    assert main.key is not None and main.key.pid == main.pid
    assert by_id.process(main.key) is main and by_id.process(ProcKey(main.pid, main.key.start + 1)) is None
    # the sampler's per-process summaries are records of the run too, keyed the same way
    sampled = {t.pid: t for t in by_id.sampled}
    assert main.pid in sampled and sampled[main.pid].start_ticks == main.key.start
    assert sampled[main.pid].cmdline[-1].endswith("exit_kinds.py")
    assert find_run(finished["run_id"][:-3]) == (finished["run_id"], finished["run_dir"])


def test_the_store_row_is_derived_from_the_record(finished, gpuscope_home, monkeypatch):
    """The store keeps an index (status, times, process pids), not a second copy of the summary."""
    monkeypatch.setenv("GPUSCOPE_HOME", str(gpuscope_home))
    with db.connect() as conn:
        row = store_runs.get_run(conn, finished["run_id"])
        stored = conn.execute("SELECT summary_json FROM runs WHERE id=?", (finished["run_id"],)).fetchone()
        pids = {r[0] for r in conn.execute("SELECT pid FROM run_processes WHERE run_id=?", (finished["run_id"],))}
    assert row is not None and row.status is RunStatus.EXITED and stored[0] is None
    record = open_run(finished["run_id"])
    assert (row.started_ns, row.ended_ns, row.exit_code) == (record.started_ns, record.ended_ns, 0)
    assert pids == {p.pid for p in record.processes}
    assert row.describe() == record.describe()


def test_a_run_folder_of_the_old_format_opens(tmp_path):
    """A folder written before the record (no started_ns, no start ticks in rows or headers)."""
    folder = tmp_path / "20261202-065850-876395c7"
    shutil.copytree(OLD_RUN, folder)
    record = open_run(folder)
    saved = json.loads((OLD_RUN / "summary.json").read_text())
    assert record.run_id == saved["run_id"] and record.status is RunStatus.EXITED
    assert record.exit == ExitStatus(0, None) and record.run_folder == str(folder)
    assert record.started_ns == int(os.stat(folder / "spec.json").st_mtime * 1e9)   # the folder's time
    assert record.duration_s == pytest.approx(saved["duration_s"], abs=1e-6)
    assert [p.to_dict() | {"start_ticks": None} for p in record.processes] == \
           [{**p, "start_ticks": None} for p in _known_keys(saved["processes"])]
    assert all(p.start_ticks is None and p.key is None for p in record.processes)
    assert sorted(p.role for p in record.processes if p.role == "pool worker") == ["pool worker"] * 2
    assert record.spec["start_method"] == "default"
    # and today's code reads its event logs as the old code did (its rows from the logs alone)
    from gpuscope.trace.process_rows import build_rows

    rows = {r.pid: r for r in build_rows(folder)}
    for p in record.processes:
        if p.pid in rows and p.exit_source == "process":
            assert (rows[p.pid].role, rows[p.pid].ranges, rows[p.pid].exit_code) == (p.role, p.ranges, p.exit_code)


def _known_keys(rows: list[dict]) -> list[dict]:
    from dataclasses import fields

    from gpuscope.runrecord import ProcessRow

    names = [f.name for f in fields(ProcessRow)]
    return [{n: row.get(n, [] if n in ("range_names", "top_ranges") else None) for n in names} for row in rows]


def test_a_run_without_a_summary_reads_its_rows_from_the_event_logs(tmp_path):
    """gpuscope died before the run ended: the record says so, with the processes its logs show."""
    folder = tmp_path / "20261202-065850-876395c7"
    shutil.copytree(OLD_RUN, folder)
    (folder / "summary.json").unlink()
    record = read_folder(folder)
    assert record.status is RunStatus.ERROR and "no summary.json" in (record.error or "")
    assert record.ended_ns == 0 and record.duration_s is None
    assert sorted(p.role for p in record.processes) == sorted(
        ["main", "resource tracker", "pool worker", "pool worker", "subprocess"])


def test_the_store_rebuilt_from_folders_lists_old_and_new_runs(finished, gpuscope_home, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_HOME", str(gpuscope_home))
    from gpuscope import paths

    shutil.copytree(OLD_RUN, paths.runs_dir() / "20261202-065850-876395c7")
    fresh = tmp = gpuscope_home / "rebuilt.sqlite"
    count, _ = rebuild.rebuild(tmp)
    assert count == 2
    with db.connect(fresh) as conn:
        rows = {r.id: r for r in store_runs.list_runs(conn)}
    old = rows["20261202-065850-876395c7"]
    assert old.status is RunStatus.EXITED and old.exit_code == 0 and old.ended_ns > old.started_ns
    new = rows[finished["run_id"]]
    record = open_run(finished["run_id"])
    assert (new.started_ns, new.ended_ns) == (record.started_ns, record.ended_ns)   # from the record, exact


def test_a_missing_run_is_one_clear_line(gpuscope_home, monkeypatch, run_env):
    monkeypatch.setenv("GPUSCOPE_HOME", str(gpuscope_home))
    with pytest.raises(UserError, match="no run 'nope'"):
        open_run("nope")
    res = gpuscope("history", "nope", env=run_env)
    assert res.returncode != 0 and b"Traceback" not in res.stderr and b"no run" in res.stderr
