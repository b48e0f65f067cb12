"""Diagnostics on real exports (nvtx 0.2.13 under old nsys, fork children) and on small SQLite files."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from gpuscope.nsys import diagnostics
from gpuscope.nsys.diagnostics import diagnose, nvtx_pair_note
from tests.nsys_record.helpers import NVTX_SCRIPT, need, nvtx_rows, record_script

FORK_OLD_HANDLES = """\
import multiprocessing as mp, time, nvtx

@nvtx.annotate("work")
def work(x):
    time.sleep(0.05)
    return x

if __name__ == "__main__":
    mp.set_start_method("fork")
    work(0)
    with mp.Pool(2) as pool:
        pool.map(work, range(4))
"""


@pytest.mark.nsys
@pytest.mark.parametrize("version", ["2022.4", "2024.2"])
def test_nvtx_0213_under_old_nsys_is_diagnosed(provisioned, nvtx13_python, tmp_path, version):
    inst = need(provisioned, version)
    session, result, _ = record_script(inst, tmp_path, NVTX_SCRIPT, python=nvtx13_python)
    assert any("nvtx 0.2.13 is too new for nsys" in n for n in session.notes)   # said before the run
    assert result.ok, result.reason
    rows = nvtx_rows(result.sqlite_path)
    assert {t for _, t, _ in rows} <= {75, 76}, rows                          # no range, no mark
    (finding,) = [f for f in result.findings if f.code == "nvtx-incompatible"]
    assert finding.severity == "error" and "260 != 259" in finding.message
    assert "pip install 'nvtx<=0.2.11'" in finding.advice and inst.version in finding.advice
    app_pids = {pid for pid, _, _ in rows}
    assert app_pids and set(finding.pids) == app_pids
    # nsys's own words in the export, read with plain SQL: the finding quotes what nsys said
    said = _nsys_said(result.sqlite_path, "compatibility ID")
    assert said and all("260 != 259" in v for v in said), said
    assert [f.code for f in result.findings] == ["nvtx-incompatible"]          # one process, NVTX only: nothing else


@pytest.mark.nsys
def test_fork_children_with_parent_handles_are_diagnosed(provisioned, tmp_path):
    inst = need(provisioned, "2024.2")
    session, result, _ = record_script(inst, tmp_path, FORK_OLD_HANDLES, start_method="fork")
    assert result.ok, result.reason
    codes = {f.code: f for f in result.findings}
    assert "nvtx-discarded-handles" in codes and "spawn" in codes["nvtx-discarded-handles"].advice
    ranged = {pid for pid, t, _ in nvtx_rows(result.sqlite_path) if t == 59}
    assert len(ranged) == 1                                                    # the parent only
    assert len(codes["nvtx-none-collected"].pids) == 2 and not set(codes["nvtx-none-collected"].pids) & ranged


def _nsys_said(path, words: str) -> list[str]:
    """nsys's messages holding ``words``: DIAGNOSTIC_EVENT rows (2024.2) or StringIds (2022.4)."""
    with closing(sqlite3.connect(path)) as conn:
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        like = f"%{words}%"
        out = [v for (v,) in conn.execute("SELECT value FROM StringIds WHERE value LIKE ?", (like,))]
        if "DIAGNOSTIC_EVENT" in tables:
            out += [v for (v,) in conn.execute("SELECT text FROM DIAGNOSTIC_EVENT WHERE text LIKE ?", (like,))]
    return out


# -- small SQLite files: each rule alone, and no false alarm ---------------------------------------

def _export(path, strings=(), diag=(), nvtx=(), osrt=True, meta="META_DATA_EXPORT"):
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        conn.executemany("INSERT INTO StringIds(value) VALUES (?)", [(s,) for s in strings])
        conn.execute(f"CREATE TABLE {meta}(name TEXT, value TEXT)")
        conn.execute(f"INSERT INTO {meta} VALUES ('EXPORT_PRODUCT_VERSION', '2023.4.4.54')")
        if diag:
            conn.execute("CREATE TABLE DIAGNOSTIC_EVENT(timestamp INT, timestampType INT, source INT, "
                         "severity INT, text TEXT, globalPid INT)")
            conn.executemany("INSERT INTO DIAGNOSTIC_EVENT VALUES (0, 1, 1, 2, ?, ?)",
                             [(t, pid << 24 if pid > 0 else pid) for t, pid in diag])
        if nvtx:
            conn.execute("CREATE TABLE NVTX_EVENTS(start INT, end INT, eventType INT, text TEXT, globalTid INT, "
                         "textId INT)")
            conn.executemany("INSERT INTO NVTX_EVENTS VALUES (0, 1, ?, 'r', ?, NULL)",
                             [(t, (pid << 24) + pid) for pid, t in nvtx])
        if osrt:
            conn.execute("CREATE TABLE OSRT_API(start INT)")
        conn.commit()
    return path


def test_clean_report_has_no_findings(tmp_path):
    path = _export(tmp_path / "a.sqlite", strings=["NVTX injection initialized successfully."],
                   nvtx=[(10, 59), (10, 34), (10, 75), (11, 75), (11, 76)])
    assert diagnose(path) == []


def test_incompatible_payload_from_strings_only(tmp_path):
    path = _export(tmp_path / "b.sqlite", meta="EXPORT_META_DATA", nvtx=[(7, 75), (7, 76)],
                   strings=["NVTX binary payload extension is incompatible. Provided compatibility ID 260 != 259."])
    (f,) = diagnose(path)
    assert f.code == "nvtx-incompatible" and f.pids == (7,) and "2023.4.4.54" in f.message


def test_domain_only_counts_only_when_no_process_has_events(tmp_path):
    only = _export(tmp_path / "c.sqlite", nvtx=[(5, 75), (5, 76)])
    assert [f.code for f in diagnose(only)] == ["nvtx-domain-only"]
    mixed = _export(tmp_path / "d.sqlite", nvtx=[(5, 75), (6, 59)])
    assert diagnose(mixed) == []


def test_discarded_and_silent_children(tmp_path):
    text = ("3 NVTX annotations were discarded because they contained at least one invalid string handle. "
            "Were the `nvtxEventAttributes_t` structures zero-initialized?")
    path = _export(tmp_path / "e.sqlite", nvtx=[(1, 59)],
                   diag=[(text, -1), ("No NVTX events collected. Does the process use NVTX?", 2),
                         ("No NVTX events collected. Does the process use NVTX?", 3)])
    codes = {f.code: f for f in diagnose(path)}
    assert set(codes) == {"nvtx-discarded-handles", "nvtx-none-collected"}
    assert "3 NVTX annotation(s)" in codes["nvtx-discarded-handles"].message
    assert codes["nvtx-none-collected"].pids == (2, 3)


def test_nothing_recorded_when_injection_did_not_take(tmp_path):
    path = _export(tmp_path / "f.sqlite", strings=["No NVTX events collected. Does the process use NVTX?"],
                   osrt=False)
    assert [(f.code, f.severity) for f in diagnose(path)] == [("nothing-recorded", "error")]


def test_nvtx_pair_note():
    assert nvtx_pair_note("0.2.11", (2022, 4, 2, 1)) is None
    assert nvtx_pair_note("0.2.13", (2025, 1, 1)) is None
    assert nvtx_pair_note(None, (2022, 4)) is None
    note = nvtx_pair_note("0.2.14", (2024, 2, 3, 38))
    assert note.startswith("nvtx 0.2.14 is too new for nsys 2024.2.3.38") and diagnostics.NVTX_MAX_OLD in note


def test_a_silent_helper_beside_ranged_processes_is_no_finding(tmp_path):
    """A spawn pool's resource tracker makes no NVTX calls; nsys says so; that is not a problem."""
    path = _export(tmp_path / "g.sqlite", nvtx=[(1, 59)],
                   diag=[("No NVTX events collected. Does the process use NVTX?", 2)])
    assert [f.code for f in diagnose(path)] == []
