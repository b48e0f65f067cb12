"""QtReportView: loads real runs off the GUI thread, summary tables equal `gpuscope report --json`,
bad files give one-line errors and leave the view working, Cancel drops a load, and (with nsys)
the coverage banner explains a fork child that nsys missed."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from gpuscope.app import workers
from gpuscope.app.report.qt_report_view import QtReportView
from gpuscope.app.timeline.qt_timeline import GUTTER
from gpuscope.fix import SetNsysForkTracing
from gpuscope.trace import timeline as T
from tests.app.timeline_support import (MAIN_NVTX, WORKLOAD_NVTX, gpuscope_report_json, gpuscope_run,
                                        nsys_available, nsys_run, nsys_stats_nvtx, save_shot, write_workload)

pytestmark = pytest.mark.gui
LOAD_MS = 60_000


@pytest.fixture(scope="module")
def spawn_run(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("reportrun")
    return gpuscope_run(write_workload(folder), home=folder / "home")


@pytest.fixture
def view(qtbot):
    v = QtReportView()
    qtbot.addWidget(v)
    v.resize(1300, 900)
    v.show()
    yield v
    assert workers.wait_all(30_000)


def _load(qtbot, view: QtReportView, target) -> object:
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS) as sig:
        view.show_run(target) if Path(target).is_dir() else view.open_file(target)
    return sig.args[0]


def _by_name(table, key: str = "Count") -> dict[str, str]:
    names = table.column_values("Name")
    return dict(zip(names, table.column_values(key)))


def shown_nvtx_counts(view: QtReportView) -> dict[str, int]:
    """The NVTX tab's {name: count}, read back from the table the user sees."""
    return {n: int(c.replace(",", "")) for n, c in _by_name(view.summary.tables["nvtx"]).items()}


def assert_tables_match_cli(view: QtReportView, cli: dict) -> None:
    """Every summary the CLI prints is a tab with the same rows, numbers and formatting."""
    keys = [k for k in ("nvtx", "kernel", "cuda_api", "memop", "osrt") if cli.get(f"{k}_summary")]
    assert set(keys) <= set(view.summary.tables)
    for key in keys:
        rows = cli[f"{key}_summary"]
        table = view.summary.tables[key]
        assert table.proxy.rowCount() == len(rows)
        counts, totals = _by_name(table), _by_name(table, "Total (ns)")
        for r in rows:
            name = r["name"] or ""
            assert counts[name] == f"{r['count']:,}", (key, name)
            assert totals[name] == f"{r['total_ns']:,}", (key, name)
    procs = view.summary.tables["processes"]
    shown = dict(zip(procs.column_values("PID", Qt.UserRole), procs.column_values("NVTX ranges", Qt.UserRole)))
    gs = dict(zip(procs.column_values("PID", Qt.UserRole), procs.column_values("gpuscope ranges", Qt.UserRole)))
    for p in cli["processes"]:
        assert shown[p["pid"]] == p["nvtx_ranges"] and gs[p["pid"]] == p["gpuscope_ranges"]


def test_run_loads_off_thread_and_summary_matches_gpuscope_report(qtbot, view, spawn_run):
    report = _load(qtbot, view, spawn_run["run_dir"])
    assert not view.busy and not view.busy_row.isVisible()
    ranged = {p["pid"] for p in spawn_run["processes"] if p["ranges"] > 0}
    assert {b.pid for b in view.timeline.layout_model.processes if b.lanes} == ranged
    assert len(ranged) == 3
    cli = gpuscope_report_json(spawn_run["run_dir"])
    assert_tables_match_cli(view, cli)
    assert shown_nvtx_counts(view) == WORKLOAD_NVTX                  # what the script did, counted from its text
    procs = view.summary.tables["processes"]
    ranges = dict(zip(procs.column_values("PID", Qt.UserRole), procs.column_values("gpuscope ranges", Qt.UserRole)))
    main = next(p["pid"] for p in spawn_run["processes"] if p["role"] == "main")
    assert ranges[main] == sum(MAIN_NVTX.values()) and sum(ranges.values()) == sum(WORKLOAD_NVTX.values())
    nvtx = view.summary.tables["nvtx"]
    # numeric sort on raw values: Count ascending is ascending numbers, not text
    nvtx.view.sortByColumn([c.title for c in nvtx.model.columns].index("Count"), Qt.AscendingOrder)
    raw = nvtx.column_values("Count", Qt.UserRole)
    assert raw == sorted(raw)
    assert not view.banner.isVisible()      # no nsys: nothing to explain
    assert "gpuscope's own records" in view.status.text()
    assert report is view.report


def test_selecting_a_range_fills_the_details_pane(qtbot, view, spawn_run):
    _load(qtbot, view, spawn_run["run_dir"])
    tl = view.timeline.timeline
    i = next(j for j, n in enumerate(tl.ranges.name_id) if tl.name(n) == "load_batch")
    pt = view.timeline.position_of("nvtx", i).toPoint()
    with qtbot.waitSignal(view.sigRangeSelected, timeout=2000):
        qtbot.mouseClick(view.timeline, Qt.LeftButton, pos=pt)
    text = view.details.toPlainText()
    assert "load_batch" in text and f"{int(tl.ranges.pid[i])}" in text and "duration" in text


@pytest.mark.parametrize("kind", ["garbage", "truncated", "not-nsys", "missing", "junk-rep"])
def test_bad_report_shows_one_line_error_and_the_view_keeps_working(qtbot, view, spawn_run, tmp_path, kind):
    if kind == "junk-rep" and not nsys_available() and os.environ.get("CI") != "true":
        pytest.skip("exporting a .nsys-rep needs Nsight Systems")
    _load(qtbot, view, spawn_run["run_dir"])
    before = view.report
    bad = tmp_path / "bad.sqlite"
    if kind == "garbage":
        bad.write_bytes(b"\x00garbage, not a report" * 100)
    elif kind == "truncated":
        conn = sqlite3.connect(tmp_path / "full.sqlite")
        conn.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, "x" * 200) for i in range(5000)])
        conn.commit()
        conn.close()
        data = (tmp_path / "full.sqlite").read_bytes()
        bad.write_bytes(data[: len(data) // 3])
    elif kind == "not-nsys":
        conn = sqlite3.connect(bad)
        conn.execute("CREATE TABLE t (x)")
        conn.close()
    elif kind == "junk-rep":
        bad = tmp_path / "junk.nsys-rep"
        bad.write_bytes(bytes(range(256)) * 40)
    with qtbot.waitSignal(view.sigError, timeout=LOAD_MS) as sig:
        view.open_file(bad if kind != "missing" else tmp_path / "nope.nsys-rep")
    msg = sig.args[0]
    assert "\n" not in msg and "Traceback" not in msg
    assert str(tmp_path) in msg or kind == "junk-rep"    # the core's nsys-export message names no file
    expected = {"garbage": "not an SQLite file", "truncated": "corrupt", "not-nsys": "not an Nsight Systems export",
                "missing": "no such file", "junk-rep": "nsys export failed"}[kind]
    assert expected in msg
    assert view.status.text() == msg and not view.busy
    assert view.report is before and view.timeline.layout_model is not None
    _load(qtbot, view, spawn_run["run_dir"])      # still usable
    assert view.report is not before


def test_cancel_drops_the_load_and_keeps_the_view_usable(qtbot, view, spawn_run):
    view.open_file(spawn_run["run_dir"])
    assert view.busy and view.busy_row.isVisibleTo(view)
    qtbot.mouseClick(view.cancel_button, Qt.LeftButton)
    assert not view.busy and "cancelled" in view.status.text()
    with qtbot.assertNotEmitted(view.sigLoaded, wait=1500):
        pass
    assert view.report is None
    _load(qtbot, view, spawn_run["run_dir"])


needs_nsys = pytest.mark.skipif(not nsys_available() and os.environ.get("CI") != "true",
                                reason="Nsight Systems not provisioned (scripts/provision_nsys.py)")


@pytest.mark.nsys
@needs_nsys
@pytest.mark.timeout(300)
def test_nsys_fork_run_banner_explains_missed_child_and_offers_fix(qtbot, view, tmp_path):
    run = nsys_run(write_workload(tmp_path), "--nsys-fork", "off", method="fork", home=tmp_path / "home")
    report = _load(qtbot, view, run["run_dir"])
    assert report.sqlite_path is not None and report.coverage is not None
    missing = [p for p in report.coverage.processes if p.status == "missing"]
    assert missing, report.coverage.to_dict()
    assert view.banner.isVisible()
    # one list, one format: the missed processes and nsys's diagnostics are findings in the app's list
    banner = view.banner
    assert banner.view.findings == banner.findings and banner.findings[0].code == "nsys-missed-ranges"
    assert f"{len(missing)} process(es)" in banner.head.text()
    text = banner.plain_text()
    for p in missing:
        assert f"pid {p.pid}" in text and "forked without exec" in text
        assert any(p.pid in f.pids for f in banner.findings)
    assert "--start-method spawn" in text and banner.fixes
    assert "--start-method spawn" in banner.view.detail.toPlainText()     # the selected one's fix
    with qtbot.waitSignal(view.sigFixRequested, timeout=1000) as sig:
        qtbot.mouseClick(view.banner.apply_button, Qt.LeftButton)
    assert sig.args[0] == SetNsysForkTracing(True)      # keeps the start method; records fork children
    lay = view.timeline.layout_model
    assert lay.mixed_sources
    gs_lanes = {ln.pid for b in lay.processes for ln in b.lanes if ln.source == T.SOURCE_GPUSCOPE}
    assert gs_lanes == {p.pid for p in missing}
    assert_tables_match_cli(view, gpuscope_report_json(run["run_dir"]))
    assert shown_nvtx_counts(view) == WORKLOAD_NVTX      # nsys's main + gpuscope's records of the missed children
    seen_by_nsys = nsys_stats_nvtx(Path(run["run_dir"]) / "report.nsys-rep")
    assert {k: seen_by_nsys.get(k) for k in MAIN_NVTX} == MAIN_NVTX, seen_by_nsys
    # gpuscope's own records are hatched: a bar of one colour shows two colours
    tl = view.timeline.timeline
    gs = np.flatnonzero(tl.ranges.source == T.SOURCE_GPUSCOPE)
    i = int(gs[np.argmax(tl.ranges.end_ns[gs] - tl.ranges.start_ns[gs])])
    view.timeline.set_view(float(tl.ranges.start_ns[i]), float(tl.ranges.end_ns[i]))
    pt = view.timeline.position_of("nvtx", i).toPoint()
    img = view.timeline.grab().toImage()
    hatched = {img.pixel(pt.x() + dx, pt.y() + dy) for dx in range(-12, 12) for dy in (-3, 0, 3)}
    assert len(hatched) >= 2
    nv = int(np.flatnonzero(tl.ranges.source == T.SOURCE_NSYS)[0])
    view.timeline.set_view(float(tl.ranges.start_ns[nv]), float(tl.ranges.end_ns[nv]))
    pt = view.timeline.position_of("nvtx", nv).toPoint()
    x = int(GUTTER + view.timeline.plot_width() * 0.85)     # clear of the label on the left
    img = view.timeline.grab().toImage()
    assert len({img.pixel(x + dx, pt.y() + dy) for dx in range(-12, 12) for dy in (-3, 0, 3)}) == 1
    save_shot(view.banner, "timeline-coverage-banner.png", tmp_path)
    view.grab().save(str(tmp_path / "report-nsys-fork.png"))


def test_show_report_of_a_loaded_report_small_at_once_large_off_thread(qtbot, view, spawn_run):
    from gpuscope.nsys.report import load_report
    from tests.app.timeline_support import synthetic_timeline

    report = load_report(spawn_run["run_dir"])
    with qtbot.waitSignal(view.sigLoaded, timeout=1000):
        view.show_report(report)              # small: shown before show_report returns
    assert view.report is report and not view.busy
    report.loaded = synthetic_timeline(400_000)   # as if the core had read a large timeline
    view.show_report(report)
    assert view.busy and view.busy_row.isVisibleTo(view)
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS):
        pass
    assert view.timeline.layout_model.n_items == len(report.timeline.ranges)


def test_show_report_reads_a_lazy_timeline_off_the_gui_thread(qtbot, view, spawn_run):
    import dataclasses
    import threading

    from gpuscope.nsys.report import load_report

    report = load_report(spawn_run["run_dir"])
    tl = report.timeline
    threads = []

    def loader():
        threads.append(threading.current_thread())
        return tl

    lazy = dataclasses.replace(report, loaded=None, loader=loader)
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS):
        view.show_report(lazy)
        assert view.busy
    assert threads and threads[0] is not threading.main_thread()
    assert view.timeline.timeline is tl


@pytest.mark.nsys
@needs_nsys
@pytest.mark.timeout(300)
def test_kernels_of_a_real_export_get_stream_lanes_and_tables_match_cli(qtbot, view, tmp_path):
    from tests.app.timeline_support import KERNEL_NAMES, add_kernels, full_export

    run = nsys_run(write_workload(tmp_path), home=tmp_path / "home")
    main = next(p["pid"] for p in run["processes"] if p["role"] == "main")
    full = full_export(Path(run["run_dir"]) / "report.nsys-rep", tmp_path / "full.sqlite")
    from gpuscope.nsys.report import load_report

    tl = load_report(full, use_cache=False).timeline
    mine = tl.ranges.pid == main
    add_kernels(full, main, int(tl.ranges.start_ns[mine].min()), int(tl.ranges.end_ns[mine].max()
                                                                     - tl.ranges.start_ns[mine].min()))
    report = _load(qtbot, view, full)
    assert len(report.timeline.kernels) == 60 and len(report.timeline.memops) == 15
    assert len(report.timeline.cuda_api) == 60
    block = next(b for b in view.timeline.layout_model.processes if b.pid == main)
    gpu = [(ln.device, ln.stream) for ln in block.lanes if ln.kind == "gpu"]
    assert sorted(gpu) == [(d, s) for d in (0, 1) for s in (7, 8, 9)]
    kinds = [ln.kind for ln in block.lanes]
    assert kinds[0] == "nvtx" and kinds.index("cuda_api") < kinds.index("gpu")   # threads, then streams
    api = next(ln for ln in block.lanes if ln.kind == "cuda_api")
    assert api.tid == main and len(api.rows) == 1 and len(api.rows[0].ref) == 60
    assert_tables_match_cli(view, gpuscope_report_json(str(full)))
    assert shown_nvtx_counts(view) == WORKLOAD_NVTX == nsys_stats_nvtx(Path(run["run_dir"]) / "report.nsys-rep")
    kernels = {n: int(c.replace(",", "")) for n, c in _by_name(view.summary.tables["kernel"]).items()}
    assert kernels == {name: 20 for name in KERNEL_NAMES}              # add_kernels: 60 kernels, 3 names in turn
    assert {"kernel", "memop"} <= set(view.summary.tables)
    k = int(np.argmax(report.timeline.kernels.end_ns - report.timeline.kernels.start_ns))
    view.timeline.set_view(float(report.timeline.kernels.start_ns[k]) - 1e6,
                           float(report.timeline.kernels.end_ns[k]) + 1e6)
    pt = view.timeline.position_of("kernel", k)
    with qtbot.waitSignal(view.sigRangeSelected, timeout=2000) as sig:
        qtbot.mouseClick(view.timeline, Qt.LeftButton, pos=pt.toPoint())
    d = sig.args[0]
    assert d["kind"] == "kernel" and d["index"] == k and d["grid"] == [64, 1, 1] and d["block"] == [256, 1, 1]
    c = int(np.flatnonzero(report.timeline.cuda_api.correlation == d["correlation"])[0])
    api_call = report.timeline.cuda_api
    view.timeline.set_view(float(api_call.start_ns[c]) - 1e5, float(api_call.end_ns[c]) + 1e5)
    with qtbot.waitSignal(view.sigRangeSelected, timeout=2000) as sig:
        qtbot.mouseClick(view.timeline, Qt.LeftButton, pos=view.timeline.position_of("cuda_api", c).toPoint())
    assert sig.args[0]["kind"] == "cuda_api" and sig.args[0]["name"] == "cudaLaunchKernel_v7000"
    assert sig.args[0]["correlation"] == d["correlation"]
    view.grab().save(str(tmp_path / "report-gpu-lanes.png"))


def test_own_records_shown_while_nsys_finishes(qtbot, view, spawn_run, tmp_path):
    """What the window shows under --nsys once the program has ended and nsys is still busy: the run's
    own event logs (load_events), its ranges, tables and the note saying nsys's report follows."""
    from gpuscope.nsys import report as nsys_report

    report = nsys_report.load_events(spawn_run["run_dir"], note=nsys_report.PENDING_NOTE)
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS):
        view.show_report(report)
    assert view.report is report and report.sqlite_path is None
    assert shown_nvtx_counts(view) == WORKLOAD_NVTX
    assert {b.pid for b in view.timeline.layout_model.processes if b.lanes} == \
        {p["pid"] for p in spawn_run["processes"] if p["ranges"] > 0}
    assert "nsys is still finishing its report" in view.status.text()
    save_shot(view, "report-own-records-while-nsys.png", tmp_path)
