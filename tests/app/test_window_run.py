"""The whole window drives real runs: Run, live plots, process tree, report, Stop, bad reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from apphelpers import fill, make_window, run_processes, start_nsys_run, start_torchrun, table_counts, wait_report
from PySide6.QtCore import Qt

from gpuscope.nsys import report as nsys_report
from tests import requires
from tests.app.timeline_support import nsys_stats_nvtx

pytestmark = pytest.mark.gui


def pool_spawn_counts(seconds: float) -> dict[str, int]:
    """The NVTX ranges scripts/pool_spawn.py makes for argv ``seconds``, counted from its text:
    ``setup`` once, ``work`` per task (wrapped by gpuscope's task range), max(2, int(s/0.25)*2) tasks."""
    tasks = max(2, int(seconds / 0.25) * 2)
    return {"setup": 1, "work": tasks, "gpuscope:work": tasks}


def test_spawn_run_plots_tree_and_report_match_cli(qtbot, run_env, gpuscope_home):
    w = make_window(qtbot)
    fill(w, "pool_spawn.py", "2", "spawn")
    with qtbot.waitSignal(w.controller.sigStarted, timeout=30_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    assert not w.panel.run_button.isEnabled() and w.panel.stop_button.isEnabled()
    # live plots receive data: CPU and RSS curves for the run's processes, points added tick by tick
    # (a process seen first on the last tick has one point so far: any curve, not the first one)
    def plotted() -> bool:
        data = [c.getData() for c in w.live.plots["rss"].curves.values()]
        return w.model.batches >= 3 and any(len(x) >= 2 and (y > 0).any() for x, y in data)

    qtbot.waitUntil(plotted, timeout=15_000)
    # the process tree shows the two pool workers, with their role, under main
    qtbot.waitUntil(lambda: sorted(r.role for r in w.model.procs.values() if r.role) ==
                    ["main", "pool worker", "pool worker", "resource tracker"], timeout=20_000)
    w.tree.refresh()
    main_pid = next(p for p, r in w.model.procs.items() if r.role == "main")
    main_item = w.tree.items[main_pid]
    roles = sorted(main_item.child(i).text(1) for i in range(main_item.childCount()))
    assert roles.count("pool worker") == 2
    # no GPU here: one line says so, and the GPU plots give their room to CPU and RSS
    assert w.live.plots["gpu_util"].widget.isHidden() and w.live.plots["gpu_mem"].widget.isHidden()
    assert "GPU plots off" in w.live.gpu_note.text() and w.live.gpu_note.isVisible()
    # the end of the run, then its report
    wait_report(qtbot, w, timeout=60_000)
    report = w.last_report
    assert w.last_result.status == "exited" and w.panel.run_button.isEnabled()
    assert "exited" in w.state_label.text()
    tl = report.timeline
    pids_with_ranges = set(int(p) for p in tl.ranges.pid) if len(tl.ranges) else set()
    assert len(pids_with_ranges) == 3, pids_with_ranges
    cli = subprocess.run([sys.executable, "-m", "gpuscope", "report", str(w.last_result.run_dir), "--json"],
                         env=run_env, capture_output=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    cli_counts = {r["name"]: r["count"] for r in json.loads(cli.stdout)["nvtx_summary"]}
    app_counts = {r.name: r.count for r in report.summaries["nvtx"]}
    assert app_counts == cli_counts == pool_spawn_counts(2)
    assert "task 15 done" in w.console.plain_text()
    assert w.console.plain_text().count("GPU telemetry off") == 1   # the no-GPU note once, not at start and end
    if hasattr(w.report_view, "show_report"):   # the report view (timeline + summary tables) shows them
        assert cli_counts in table_counts(w.report_view), table_counts(w.report_view)
        layout = w.report_view.timeline.layout_model
        drawn = {b.pid for b in layout.processes if any(len(r.ref) for lane in b.lanes for r in lane.rows)}
        assert drawn == pids_with_ranges
    assert not run_processes(gpuscope_home)


def test_stop_mid_run_leaves_no_process(qtbot, gpuscope_home):
    w = make_window(qtbot)
    fill(w, "sleepy_pool.py", "", "spawn")
    with qtbot.waitSignal(w.controller.sigStarted, timeout=30_000):
        w.panel.run_button.click()
    qtbot.waitUntil(lambda: sum(r.alive for r in w.model.procs.values()) >= 3, timeout=20_000)
    assert len(run_processes(gpuscope_home)) >= 3
    with qtbot.waitSignal(w.controller.sigEnded, timeout=30_000) as blocker:
        w.panel.stop_button.click()
    assert blocker.args[0].status == "stopped"
    assert run_processes(gpuscope_home) == []
    assert "stopped" in w.state_label.text()
    wait_report(qtbot, w)   # the report of a stopped run loads too


def test_corrupt_report_shows_error_and_app_keeps_working(qtbot, tmp_path):
    w = make_window(qtbot)
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x13" * 5000)
    with qtbot.waitSignal(w.sigReportFailed, timeout=20_000) as blocker:
        w.load_report(bad)
    text = blocker.args[0]
    assert "broken.sqlite" in text and "Traceback" not in text and "\n" not in text
    assert w.last_error == text and text in w.state_label.text()
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("hello")
    with qtbot.waitSignal(w.sigReportFailed, timeout=20_000) as blocker:
        w.load_report(not_sqlite)
    assert "not an SQLite file" in blocker.args[0]
    # still usable: a run goes through after the errors
    fill(w, "pool_spawn.py", "0.5", "spawn")
    with qtbot.waitSignal(w.controller.sigEnded, timeout=60_000) as blocker:
        w.panel.run_button.click()
    assert blocker.args[0].status == "exited"
    wait_report(qtbot, w)


def test_bad_script_is_one_line_error_and_no_run(qtbot, tmp_path):
    w = make_window(qtbot)
    w.panel.set_script(str(tmp_path / "missing.py"))
    w.panel.run_button.click()
    assert "script not found" in w.last_error and not w.controller.busy
    w.panel.set_script("")
    w.panel.run_button.click()
    assert w.last_error == "choose a script to run"


@pytest.mark.torch
def test_torchrun_ranks_in_the_process_tree(qtbot, gpuscope_home):
    requires.torch()
    w = make_window(qtbot)
    start_torchrun(qtbot, w)
    qtbot.waitUntil(lambda: sorted(r.rank for r in w.model.procs.values() if r.rank is not None) == [0, 1],
                    timeout=90_000)
    w.tree.refresh()
    ranks = sorted(item.text(2) for item in w.tree.items.values() if item.text(2))
    assert ranks == ["0", "1"]
    # the live legends name each rank once: "PID rank 1", never "rank 1 1"
    def legend() -> list[str]:
        w.live.refresh()
        return w.live.plots["cpu"].legend.texts()
    qtbot.waitUntil(lambda: sum(t.endswith((" rank 0", " rank 1")) for t in legend()) == 2, timeout=30_000)
    assert not [t for t in legend() if t.endswith((" 0 0", " 1 1"))], legend()
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=120_000)
    assert w.last_result.status == "exited", w.console.plain_text()[-2000:]
    assert "rank 0 sum 3.0" in w.console.plain_text() and "rank 1 sum 3.0" in w.console.plain_text()
    assert run_processes(gpuscope_home) == []
    wait_report(qtbot, w)


@pytest.mark.nsys
@pytest.mark.timeout(900)
def test_nsys_run_through_the_window_matches_cli(qtbot, run_env, gpuscope_home):
    from gpuscope.nsys.locate import list_installs

    if not list_installs():
        if os.environ.get("CI") == "true":
            pytest.fail("no Nsight Systems install (scripts/provision_nsys.py)")
        pytest.skip("no Nsight Systems install (scripts/provision_nsys.py)")
    w = make_window(qtbot)
    fill(w, "pool_spawn.py", "0.5", "spawn")
    w.panel.nsys.setChecked(True)
    shown = []   # (report, run still busy) for every report the Report tab drew
    w.report_view.sigLoaded.connect(lambda r: shown.append((r, w.controller.busy)))
    start_nsys_run(qtbot, w, timeout=240_000)
    wait_report(qtbot, w, timeout=240_000)
    shown[:] = [(r, busy) for r, busy in shown if str(w.last_result.run_dir) in str(r.path)]  # this run's
    assert w.last_result.status == "exited", w.console.plain_text()[-2000:]
    report = w.last_report
    assert report.sqlite_path is not None and report.nsys_version
    # issue 14.3: the run's own event logs were drawn while nsys was still finishing, then replaced
    early = [(r, busy) for r, busy in shown if r.sqlite_path is None]
    assert early and early[0][1], [(r.path, busy) for r, busy in shown]
    assert len(early[0][0].timeline.ranges) > 0 and nsys_report.PENDING_NOTE in early[0][0].notes
    qtbot.waitUntil(lambda: shown and shown[-1][0] is report, timeout=60_000)
    assert w.report_view.report is report
    cli = subprocess.run([sys.executable, "-m", "gpuscope", "report", str(w.last_result.run_dir), "--json"],
                         env=run_env, capture_output=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    cli_counts = {r["name"]: r["count"] for r in json.loads(cli.stdout)["nvtx_summary"]}
    assert cli_counts == pool_spawn_counts(0.5) and cli_counts in table_counts(w.report_view)
    rep = Path(w.last_result.run_dir) / "report.nsys-rep"
    assert nsys_stats_nvtx(rep) == pool_spawn_counts(0.5)     # Nsight Systems' own count agrees
    assert run_processes(gpuscope_home) == []
