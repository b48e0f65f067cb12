"""Real recordings under nsys 2022.4 and 2024.2 (all provisioned releases with
GPUSCOPE_TEST_ALL_NSYS=1): reader, summaries == `nsys stats`, processes. Every scenario is recorded
on the newest release, the spawn one on the oldest too (tests/nsys_versions.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gpuscope.nsys import pages, reader
from gpuscope.nsys import report as nsys_report
from gpuscope.trace import summary
from gpuscope.trace import timeline as T

from nsysrec import VERSIONS, record, stats_csv
from tests.nsys_versions import BEHAVIOUR, NEWEST, pairs

pytestmark = pytest.mark.nsys

SCENARIOS = ("spawn", "fork", "fork_flag")
# Processes with NVTX ranges in nsys, per scenario (the acceptance of issue #3).
EXPECTED_PIDS = {"spawn": 3, "fork": 1, "fork_flag": 3}
FLOAT_COLS = ("Time (%)", "Avg (ns)", "Med (ns)", "StdDev (ns)")
INT_COLS = ("Total Time (ns)", "Min (ns)", "Max (ns)")


def _ours(row: summary.SummaryRow) -> dict:
    return {"Time (%)": row.time_pct, "Total Time (ns)": row.total_ns, "Avg (ns)": row.avg_ns,
            "Med (ns)": row.med_ns, "Min (ns)": row.min_ns, "Max (ns)": row.max_ns,
            "StdDev (ns)": row.stddev_ns}


def assert_same_rows(ours: list[summary.SummaryRow], theirs: list[dict], name_col: str, count_col: str,
                     style: bool = False) -> None:
    """Row-by-row equality; ties in total may come in any order, so rows are matched by key."""
    assert len(ours) == len(theirs), (ours, theirs)
    by_key = {(r[name_col], r.get("Style") if style else None): r for r in theirs}
    assert len(by_key) == len(theirs)
    totals = [int(r["Total Time (ns)"]) for r in theirs]
    assert [r.total_ns for r in ours] == totals, "row order (by total) differs"
    for row in ours:
        ref = by_key[(row.name or "", row.style if style else None)]
        assert row.count == int(ref[count_col]), row
        mine = _ours(row)
        for col in INT_COLS:
            assert mine[col] == int(ref[col]), (col, row, ref)
        for col in FLOAT_COLS:
            assert mine[col] == float(ref[col]), (col, row, ref)


@pytest.mark.parametrize("key,scenario", pairs(SCENARIOS, "spawn"))
def test_nvtx_sum_equals_nsys_stats(recordings, key, scenario):
    path = recordings.get(key, scenario)
    rep = nsys_report.load_report(path)
    theirs = recordings.stats_rows(key, scenario, "nvtx_sum")
    assert theirs, "nsys stats printed no nvtx_sum rows"
    assert_same_rows(rep.summaries["nvtx"], theirs, "Range", "Instances", style=True)


@pytest.mark.parametrize("key", VERSIONS)
def test_timeline_paths_equal_nsys_stats(recordings, key, monkeypatch):
    """The Timeline read from the file's pages and the one read through sqlite3 hold the same
    ranges, and the nvtx_sum of either equals `nsys stats` (the first open's summary reader is
    checked by test_nvtx_sum_equals_nsys_stats)."""
    path = recordings.get(key, "spawn")
    theirs = recordings.stats_rows(key, "spawn", "nvtx_sum")
    got = []
    for off in ("", "1"):
        monkeypatch.setenv("GPUSCOPE_NO_PAGE_READER", off)
        conn = reader.open_export(path)
        info = reader.export_info(conn)
        tl = reader.read_timeline(conn, info)
        used = pages.read_columns(conn, "NVTX_EVENTS", ["start"])
        conn.close()
        assert (used is None) == (off == "1"), "the page reader refused a real export"
        assert_same_rows(summary.nvtx_summary(tl, info.naming), theirs, "Range", "Instances", style=True)
        got.append(tl)
    a, b = got
    for f in ("start_ns", "end_ns", "pid", "tid", "depth", "color", "domain_id", "category", "style", "flags",
              "end_tid"):
        assert np.array_equal(getattr(a.ranges, f), getattr(b.ranges, f)), f
    assert [a.strings.get(int(i)) for i in a.ranges.name_id] == [b.strings.get(int(i)) for i in b.ranges.name_id]


@pytest.mark.parametrize("key,scenario", pairs(SCENARIOS, "spawn"))
def test_processes_with_ranges(recordings, key, scenario):
    rep = nsys_report.load_report(recordings.get(key, scenario))
    with_ranges = [p for p in rep.processes if p["nvtx_ranges"]]
    assert len(with_ranges) == EXPECTED_PIDS[scenario], rep.processes
    names = {r.name for r in rep.summaries["nvtx"]}
    assert "expensive_op" in names
    # Each process of a pool run did some expensive_op (workers got tasks through the barrier).
    tl = rep.timeline
    op = tl.strings.lookup("expensive_op")
    assert len(np.unique(tl.ranges.pid[tl.ranges.name_id == op])) == EXPECTED_PIDS[scenario]


@pytest.mark.parametrize("key", VERSIONS)
def test_features_of_spawn_recording(recordings, key):
    """Domain prefix, nesting depth, marks, a start/end range ended on another thread, an open range."""
    rep = nsys_report.load_report(recordings.get(key, "spawn"))
    tl = rep.timeline
    assert rep.naming == "plain" and rep.nsys_version.startswith(key)
    names = {(r.name, r.style) for r in rep.summaries["nvtx"]}
    assert {("mydom:outer", "PushPop"), ("mydom:inner", "PushPop"), ("cross_thread", "StartEnd"),
            ("same_thread_se", "StartEnd"), ("left_open", "PushPop")} <= names
    inner = tl.ranges.name_id == tl.strings.lookup("inner")
    outer = tl.ranges.name_id == tl.strings.lookup("outer")
    assert tl.ranges.depth[inner].tolist() == [1] and tl.ranges.depth[outer].tolist() == [0]
    cross = np.flatnonzero(tl.ranges.name_id == tl.strings.lookup("cross_thread"))
    assert len(cross) == 1 and tl.ranges.flags[cross[0]] & T.FLAG_OTHER_THREAD
    assert tl.ranges.end_tid[cross[0]] not in (-1, tl.ranges.tid[cross[0]])
    marks = {tl.strings.get(int(i)) for i in tl.marks.name_id}
    assert {"mark_one", "mark_two", "clock-probe"} <= marks
    assert len(tl.domains) >= 1 and "mydom" in tl.domain_names().values()


@pytest.mark.parametrize("key", VERSIONS)
def test_wall_clock_alignment(recordings, key):
    """utcEpochNs + mark time lands just after the wall clock the script printed before the mark."""
    path = recordings.get(key, "spawn")
    log = (path.parent / "spawn.log").read_text()
    line = next(ln for ln in log.splitlines() if ln.startswith("clock-probe"))
    wall = int(line.split()[2])
    tl = nsys_report.load_report(path).timeline
    probe = tl.marks.start_ns[tl.marks.name_id == tl.strings.lookup("clock-probe")]
    assert len(probe) == 1
    # the mark comes after the script read the wall clock: never earlier (beyond the clocks' conversion),
    # and later by whatever the machine's load put between the two (a generous bound, not a speed)
    late = tl.wall_base_ns + int(probe[0]) - wall
    assert -5_000_000 < late < 1_000_000_000, late


def test_osrt_sum_equals_nsys_stats(recordings, installs, tmp_path_factory):
    """OS runtime summary on an nvtx,osrt recording: the newest release (every one with
    GPUSCOPE_TEST_ALL_NSYS=1)."""
    for key in BEHAVIOUR:
        out = tmp_path_factory.mktemp(f"osrt{key}")
        path = record(installs[key], out, "osrt", ["spawn"], trace="nvtx,osrt")
        ours = nsys_report.load_report(path).summaries["osrt"]
        theirs = stats_csv(installs[key], path, "osrt_sum")
        assert theirs and ours
        assert_same_rows(ours, theirs, "Name", "Num Calls")


def test_cli_on_nsys_rep_exports_beside_it(recordings, installs, tmp_path, run_env):
    """`gpuscope report X.nsys-rep` exports X.sqlite beside it with the matching version."""
    src = recordings.get(NEWEST, "spawn").with_suffix(".nsys-rep")
    rep = tmp_path / "copy.nsys-rep"
    shutil.copy(src, rep)
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--json", str(rep)],
                          capture_output=True, text=True, env=run_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (tmp_path / "copy.sqlite").exists()
    assert out["nsys_version"].startswith(NEWEST)
    assert sum(1 for p in out["processes"] if p["nvtx_ranges"]) == 3
    for key in ("processes", "nvtx_summary", "kernel_summary", "osrt_summary", "schema_version", "findings"):
        assert key in out
    row = out["nvtx_summary"][0]
    assert {"name", "style", "count", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "stddev_ns"} <= row.keys()
