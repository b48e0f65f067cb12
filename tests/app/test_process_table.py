"""Issue 16.5: the Processes tab as a table like htop's tree view.

Real runs of ``scripts/table_pool.py`` (a Pool(3)) through the window: sorting by a column keeps
children under their parent; a worker killed from outside is marked ended with its exit status;
after the run the figures are the run's ProcessRow records as the CLI table prints them; the
context menu's Stop goes through the Cleanup tab's safety rules (a process of the run stops; a
process outside the run is refused); one name per process in the Processes tab, the Report's
lanes and the CLI table.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import pytest
from apphelpers import fill, make_window, run_processes, start_torchrun, wait_report
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor

from gpuscope.views.live_model import LiveModel
from gpuscope.app.run.qt_process_tree import COL, ENDED_GREY, PID_ROLE, QtProcessTree
from gpuscope.runs.table import format_table
from gpuscope.telemetry.batch import ProcSample, SampleBatch, StartedProc
from gpuscope.trace.process_row import display_name
from tests import requires
from tests.app.timeline_support import save_shot

pytestmark = pytest.mark.gui
SHOTS = Path(tempfile.gettempdir()) / "gpuscope-test-shots"   # docs/screenshots: scripts/screenshots.py only


def _workers(w) -> list[int]:
    return sorted(p for p, r in w.model.procs.items() if r.role == "pool worker" and r.alive)


def _start(qtbot, w, tmp_path: Path, method: str = "spawn") -> Path:
    stop = tmp_path / "stop"
    fill(w, "table_pool.py", str(stop), method)
    with qtbot.waitSignal(w.controller.sigStarted, timeout=60_000):
        qtbot.mouseClick(w.panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(_workers(w)) == 3 and any(r.role == "main" for r in w.model.procs.values()),
                    timeout=60_000)
    w.tree.refresh()
    return stop


def _end(qtbot, w, stop: Path):
    stop.touch()
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=60_000)
    w.tree.refresh()
    return w.last_result


def _kids(item) -> list[int]:
    return [item.child(i).data(0, PID_ROLE) for i in range(item.childCount())]


def _main(w) -> int:
    return next(p for p, r in w.model.procs.items() if r.role == "main")


def _cli_line(result, pid: int) -> str:
    return next(line for line in format_table(result).splitlines() if line.split()[:1] == [str(pid)])


def test_sort_keeps_tree_and_after_run_figures_are_the_cli_table(qtbot, gpuscope_home, tmp_path):
    w = make_window(qtbot)
    stop = _start(qtbot, w, tmp_path)
    tree, main = w.tree, _main(w)
    main_item = tree.items[main]
    assert main_item.parent() is None and set(_workers(w)) <= set(_kids(main_item))
    # a click on the PID header (sorted ascending already) turns the order: each level descending
    header = tree.header()
    x = header.sectionViewportPosition(COL["PID"]) + 10
    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, 5))
    assert tree.sortColumn() == COL["PID"] and header.sortIndicatorOrder() == Qt.SortOrder.DescendingOrder
    kids = _kids(main_item)
    assert kids == sorted(kids, reverse=True) and len(kids) >= 4          # 3 workers + resource tracker
    assert all(tree.items[p].parent() is main_item for p in _workers(w))   # still under their parent
    # by name: "pool worker"s before "resource tracker", ties by pid
    tree.sortByColumn(COL["Process"], Qt.SortOrder.AscendingOrder)
    names = [tree.items[p].text(COL["Process"]) for p in _kids(main_item)]
    assert names == sorted(names) and names[:3] == ["pool worker"] * 3 and "resource tracker" in names
    assert _kids(main_item)[:3] == sorted(_kids(main_item)[:3])
    # flat (F5): every process at the top level, sorted as a whole
    tree.setFocus()
    qtbot.keyClick(tree, Qt.Key.Key_F5)
    assert not tree.tree_view
    assert all(tree.items[p].parent() is None for p in w.model.procs if w.model.procs[p].user)
    tree.sortByColumn(COL["PID"], Qt.SortOrder.AscendingOrder)
    order = tree.pid_order()
    assert order == sorted(order)
    qtbot.keyClick(tree, Qt.Key.Key_F5)
    assert tree.tree_view and tree.items[_workers(w)[0]].parent() is tree.items[main]
    save_shot(w.bottom, "process-table-live.png", SHOTS)

    result = _end(qtbot, w, stop)
    assert result.status == "exited", w.console.plain_text()[-2000:]
    records = {r.pid: r for r in result.processes}
    workers = [p for p, r in records.items() if r.role == "pool worker"]
    assert len(workers) == 3
    for pid, rec in records.items():
        item = tree.items[pid]
        assert item.text(COL["State"]) == "ended"
        exit_, cpu, rss, life = (item.text(COL[c]) for c in ("Exit", "CPU time", "Peak RSS", "Lifetime"))
        # the CLI table's line of this process prints the same four figures
        assert f"{life:>9} {exit_:>5} {cpu:>7} {rss:>9}" in _cli_line(result, pid), (pid, _cli_line(result, pid))
        if pid in workers:                 # real figures, not two blanks agreeing
            assert exit_ == "0" and re.fullmatch(r"\d+\.\d\d s", cpu) and re.fullmatch(r"\d+ MiB", rss), (cpu, rss)
            assert float(cpu[:-2]) == pytest.approx(rec.cpu_seconds, abs=0.006)
    # sorted by the records' CPU time, most first: the workers under main in that order
    tree.sortByColumn(COL["CPU time"], Qt.SortOrder.DescendingOrder)
    shown = [p for p in _kids(tree.items[main]) if p in workers]
    # descending turns the whole order, ties (CPU times come in 10 ms ticks) included: pid descending
    assert shown == sorted(workers, key=lambda p: (records[p].cpu_seconds, p), reverse=True)
    # one name per process: the Processes tab, the Report's lanes and the CLI table's ROLE column
    wait_report(qtbot, w, timeout=60_000)
    tl = w.last_report.timeline
    for pid, rec in records.items():
        assert tree.items[pid].text(COL["Process"]) == display_name(rec.role, rec.worker_id)
        assert f" {display_name(rec.role, rec.worker_id)[:20]:<20} " in _cli_line(result, pid)
        if rec.injected:
            assert tl.process_name(pid) == w.model.procs[pid].display == rec.display_name
    assert run_processes(gpuscope_home) == []


def test_worker_killed_from_outside_is_ended_with_its_exit_status(qtbot, gpuscope_home, tmp_path):
    w = make_window(qtbot)
    stop = _start(qtbot, w, tmp_path, method="fork")
    tree = w.tree
    victim = _workers(w)[0]
    os.kill(victim, signal.SIGKILL)        # as the Cleanup tab or a shell would

    def ended() -> bool:
        tree.refresh()
        item = tree.items[victim]
        return item.text(COL["State"]) == "ended" and item.text(COL["Exit"]) == "SIGKILL"

    qtbot.waitUntil(ended, timeout=30_000)   # while the run runs: its pool reaped it
    assert w.controller.busy
    item = tree.items[victim]
    assert item.foreground(COL["Process"]).color() == QColor(ENDED_GREY)
    assert tree.items[_main(w)].foreground(COL["Process"]).color() != QColor(ENDED_GREY)
    qtbot.waitUntil(lambda: len(_workers(w)) == 3, timeout=30_000)     # the pool's replacement
    tree.refresh()
    qtbot.waitUntil(lambda: not tree.items[victim].icon(0).isNull(), timeout=30_000)   # died-by-signal's badge
    tree.set_tree(False)
    tree.set_tree(True)
    assert not tree.items[victim].icon(0).isNull()          # kept through a flat/tree switch
    save_shot(w.bottom, "process-table-ended-live.png", SHOTS)
    result = _end(qtbot, w, stop)
    rec = next(r for r in result.processes if r.pid == victim)
    # the run's record says it too (its parent reaped it), and the table shows the record
    assert (rec.exit_signal, rec.exit_source, rec.exit_code) == ("SIGKILL", "parent", None)
    assert tree.items[victim].text(COL["Exit"]) == "SIGKILL" and " SIGKILL " in _cli_line(result, victim)
    tree.sortByColumn(COL["PID"], Qt.SortOrder.AscendingOrder)
    save_shot(w.bottom, "process-table-after-run.png", SHOTS)
    after = {p: [item.text(c) for c in range(item.columnCount())] for p, item in tree.items.items()}
    assert run_processes(gpuscope_home) == []
    # the same run reopened from History: the same rows, read from its summary.json
    with qtbot.waitSignal(w.history.sigLoaded, timeout=20_000):
        w.tabs.setCurrentWidget(w.history)
    w.history.open_row(0)
    qtbot.waitUntil(lambda: "past run" in w.live.title.text() and w.model.finished, timeout=30_000)
    tree.refresh()
    for pid, texts in after.items():
        shown = [tree.items[pid].text(c) for c in range(len(texts))]
        assert shown[COL["Exit"]:COL["OS name"]] == texts[COL["Exit"]:COL["OS name"]], pid
        assert shown[COL["State"]] == "ended" and shown[COL["Process"]] == texts[COL["Process"]]


def test_context_menu_stop_goes_through_the_cleanup_rules(qtbot, gpuscope_home, tmp_path):
    from gpuscope.store import cleanup_log
    from gpuscope.store.db import connect

    w = make_window(qtbot)
    stop = _start(qtbot, w, tmp_path)
    tree = w.tree
    target = _workers(w)[1]
    # Show stacks: the Stacks tab, this worker's card selected
    menu = tree.build_menu(target)
    next(a for a in menu.actions() if a.text() == "Show stacks").trigger()
    qtbot.waitUntil(lambda: any(c.selected and target in c.pids for c in w.stacks.card_widgets), timeout=30_000)
    assert w.bottom.currentWidget() is w.stacks
    assert all(target in c.pids for c in w.stacks.card_widgets if c.selected)
    # Stop: asked first; refused answer = nothing happens
    asked: list[str] = []
    tree.confirm = lambda title, text: asked.append(text) or False
    menu = tree.build_menu(target)
    menu.adjustSize()
    save_shot(menu, "process-table-menu.png", SHOTS)
    menu.actions()[0].trigger()
    assert asked and f"pid {target} (pool worker" in asked[0] and "SIGTERM" in asked[0]
    box = tree.confirm_box("Stop a process", asked[0])       # the dialog a user answers
    box.show()
    save_shot(box, "process-table-confirm.png", SHOTS)
    box.close()
    assert not tree.pending and os.path.exists(f"/proc/{target}")
    tree.confirm = lambda title, text: True
    stop_action = tree.build_menu(target).actions()[0]
    assert stop_action.text().startswith("Stop") and stop_action.isEnabled()
    with qtbot.waitSignal(tree.sigActionDone, timeout=30_000) as done:
        stop_action.trigger()
    res = done.args[0]
    assert res.ok and res.result == "done" and "SIGTERM" in res.message, res.message
    assert w.last_error is None or "refusing" not in w.last_error

    def ended() -> bool:
        tree.refresh()
        return tree.items[target].text(COL["State"]) == "ended" and tree.items[target].text(COL["Exit"]) == "SIGTERM"

    qtbot.waitUntil(ended, timeout=30_000)
    with closing(connect()) as conn:     # logged like the Cleanup tab's actions, with the run
        logged = [a for a in cleanup_log.list_actions(conn) if a.pid == target]
    assert logged and logged[0].result == "done" and logged[0].run_id == w.findings.run_id == tree.run_id
    # an ended row offers no Stop
    assert not tree.build_menu(target).actions()[0].isEnabled()
    _end(qtbot, w, stop)
    assert run_processes(gpuscope_home) == []


def _row_batch(pid: int, ppid: int, name: str, create_time: float) -> SampleBatch:
    """A sampler batch listing one process, with the identity the table keeps for it."""
    t = time.monotonic_ns()
    sample = ProcSample(pid, ppid, name, "S", 0.0, 1 << 20, None, 1, None, None)
    return SampleBatch(1, t, time.time_ns(), None, (sample,),
                       (), (), started=(StartedProc(pid, ppid, name, (name,), create_time, t, "session"),))


def test_stop_is_refused_for_a_process_outside_the_run(qtbot, tmp_path):
    """A row whose pid now names a process outside the run (the pid was reused: its create time
    differs), and gpuscope's own ancestor: the Cleanup rules refuse, the table says why, nothing
    is signalled."""
    from gpuscope.app import bridge
    from gpuscope.procs.read import read

    bridge.install()          # results of the worker reach the GUI thread (the window does this itself)
    outside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        model = LiveModel()
        tree = QtProcessTree(model)
        qtbot.addWidget(tree)
        tree.confirm = lambda title, text: True
        listed_as = read(outside.pid).create_time - 5.0      # the process the row was listed as
        model.add(_row_batch(outside.pid, os.getpid(), "python", listed_as))
        parent = read(os.getppid())
        model.add(_row_batch(parent.pid, parent.ppid, parent.name, parent.create_time))
        tree.refresh()
        messages: list[tuple[str, bool]] = []
        tree.sigMessage.connect(lambda text, error: messages.append((text, error)))
        with qtbot.waitSignal(tree.sigActionDone, timeout=30_000) as done:
            next(a for a in tree.build_menu(outside.pid).actions() if a.text().startswith("Stop")).trigger()
        assert done.args[0].result == "refused" and not done.args[0].ok
        assert messages[-1] == (f"refusing: pid {outside.pid} was restarted since it was listed (create time "
                                f"changed)", True)
        assert outside.poll() is None                         # not signalled
        with qtbot.waitSignal(tree.sigActionDone, timeout=30_000) as done:
            next(a for a in tree.build_menu(parent.pid).actions() if a.text().startswith("Kill")).trigger()
        assert done.args[0].result == "refused"
        assert messages[-1] == (f"refusing: pid {parent.pid} is gpuscope's ancestor", True)
        assert tree.last_message == messages[-1][0]
        # the Delete key on a selected row is Stop (with the same rules)
        tree.setCurrentItem(tree.items[outside.pid])
        tree.setFocus()
        with qtbot.waitSignal(tree.sigActionDone, timeout=30_000) as done:
            qtbot.keyClick(tree, Qt.Key.Key_Delete)
        assert done.args[0].action == "terminate" and done.args[0].result == "refused"
        assert outside.poll() is None
    finally:
        outside.kill()
        outside.wait()


def test_tool_group_stays_last_in_every_sort(qtbot):
    """Nsight Systems' processes (batches shaped like an nsys run's tree) stay in their group row,
    last, whatever column and order the table is sorted by; the user's rows sort around it."""
    from test_live_nsys_group import batch

    from gpuscope.views.procroles import NSYS_GROUP, Identity

    model = LiveModel()
    tree = QtProcessTree(model)
    qtbot.addWidget(tree)
    for i in range(3):
        model.add(batch(i, 100 + i / 10))
    model.set_identities({12: Identity("main", None, "spawn"), 13: Identity("pool worker", None, "spawn")})
    tree.refresh()
    group = tree.group_items[NSYS_GROUP]
    for col in range(len(COL)):
        for order in (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder):
            tree.sortByColumn(col, order)
            assert tree.topLevelItem(tree.topLevelItemCount() - 1) is group, (col, order)
    tree.sortByColumn(COL["CPU %"], Qt.SortOrder.AscendingOrder)
    assert [group.child(i).data(0, PID_ROLE) for i in range(group.childCount())] == [11, 14, 10]   # 1, 2, 3 %


@pytest.mark.torch
def test_torchrun_agent_has_one_name_in_every_view(qtbot, gpuscope_home):
    """torchrun's agent renames itself "pt_elastic" (its main thread's name) after gpuscope named it
    "gs:agent": both are OS names; every view calls it "torchrun agent"."""
    requires.torch()
    w = make_window(qtbot)
    start_torchrun(qtbot, w)
    agent = {}

    def seen() -> bool:
        pid = next((p for p, r in w.model.procs.items() if r.role == "torchrun agent"), None)
        if pid is not None and w.model.procs[pid].name == "pt_elastic":
            agent["pid"] = pid
        return bool(agent)

    qtbot.waitUntil(seen, timeout=90_000)
    qtbot.waitUntil(lambda: sorted(r.rank for r in w.model.procs.values() if r.rank is not None) == [0, 1],
                    timeout=90_000)
    w.tree.refresh()
    item = w.tree.items[agent["pid"]]
    assert item.text(COL["Process"]) == "torchrun agent" and item.text(COL["OS name"]) == "pt_elastic"
    save_shot(w.bottom, "process-table-torchrun.png", SHOTS)
    qtbot.waitUntil(lambda: w.last_result is not None, timeout=120_000)
    assert w.last_result.status == "exited", w.console.plain_text()[-2000:]
    wait_report(qtbot, w)
    rec = next(r for r in w.last_result.processes if r.pid == agent["pid"])
    assert rec.name == "gs:agent"                            # the record keeps the name gpuscope gave
    assert w.last_report.timeline.process_name(agent["pid"]) == rec.display_name == "torchrun agent"
    assert w.model.procs[agent["pid"]].display == "torchrun agent"
    assert run_processes(gpuscope_home) == []
