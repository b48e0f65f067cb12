"""Nsight Systems' own processes as one group in the live view: apart, collapsed, greyed, out of the
per-process plots (their total drawn instead), the user's main process at the root (issue 10.4)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from apphelpers import fill, make_window, run_processes, start_nsys_run, wait_report
from PySide6.QtGui import QColor

from gpuscope.views.live_model import LiveModel
from gpuscope.views.procroles import NSYS_GROUP, Identity
from gpuscope.app.run.qt_live_view import QtLiveView
from gpuscope.app.run.qt_process_tree import COL, QtProcessTree
from gpuscope.telemetry.batch import ProcSample, SampleBatch

pytestmark = pytest.mark.gui
SHOTS = Path(tempfile.gettempdir()) / "gpuscope-test-shots"   # docs/screenshots: scripts/screenshots.py only
# the tree `nsys profile` makes: nsys -> nsys-launcher -> python main -> pool worker; QdstrmImporter
TREE = ((10, 1, "nsys", 3.0, 60), (11, 10, "nsys-launcher", 1.0, 5), (12, 11, "python", 90.0, 200),
        (13, 12, "python", 50.0, 100), (14, 10, "QdstrmImporter", 2.0, 40))


def batch(seq: int, t_s: float) -> SampleBatch:
    """A sampler batch as the /proc sampler makes them for an nsys run (values only)."""
    procs = tuple(ProcSample(pid, ppid, name, "S", cpu, mib << 20, None, 2, None, None)
                  for pid, ppid, name, cpu, mib in TREE)
    t_ns = int(t_s * 1e9)
    return SampleBatch(seq, t_ns, t_ns, None, procs, (), ())


def test_nsys_processes_grouped_apart_in_tree_and_plots(qtbot):
    model = LiveModel()
    view, tree = QtLiveView(model), QtProcessTree(model)
    qtbot.addWidget(view)
    qtbot.addWidget(tree)
    for i in range(20):
        model.add(batch(i, 100 + i / 10))
    model.set_identities({12: Identity("main", None, "spawn"), 13: Identity("pool worker", None, "spawn")})
    tree.refresh()
    view.refresh()
    # the user's main process is a root of the tree, its worker under it; nsys's processes in the group
    assert tree.indexOfTopLevelItem(tree.items[12]) == 0 and tree.items[13].parent() is tree.items[12]
    group = tree.group_items[NSYS_GROUP]
    assert tree.indexOfTopLevelItem(group) == tree.topLevelItemCount() - 1
    assert sorted(group.child(i).text(0) for i in range(group.childCount())) == ["10", "11", "14"]
    assert not group.isExpanded()
    assert group.text(COL["Process"]) == NSYS_GROUP and group.text(COL["OS name"]) == "total of 3 processes"
    assert group.text(COL["CPU %"]) == "6" and group.text(COL["RSS"]) == "105.0 MiB"   # 3+1+2 %, 60+5+40 MiB
    assert group.foreground(1).color() == QColor("#8a8a8a") and tree.items[12].foreground(1).color() != \
        QColor("#8a8a8a")
    # plots: the user's processes and one total curve for nsys's
    assert set(view.plots["cpu"].curves) == {("proc", "cpu", 12), ("proc", "cpu", 13), ("group", "cpu", 0)}
    total = view.plots["rss"].curves[("group", "rss", 0)].getData()[1]     # drawn in MiB
    assert total[-1] == 105 and view.plots["rss"].labels[("group", "rss", 0)] == "Nsight Systems (total)"
    assert view.show_tools.isVisibleTo(view) and not view.show_tools.isChecked()
    view.show_tools.setChecked(True)            # each of nsys's processes drawn too, then hidden again
    assert {("proc", "cpu", p) for p in (10, 11, 14)} <= set(view.plots["cpu"].curves)
    view.show_tools.setChecked(False)
    assert not {("proc", "cpu", p) for p in (10, 11, 14)} & set(view.plots["cpu"].curves)


@pytest.mark.nsys
@pytest.mark.timeout(900)
def test_nsys_run_live_view_groups_nsys(qtbot, gpuscope_home):
    from gpuscope.nsys.locate import list_installs

    if not list_installs():
        if os.environ.get("CI") == "true":
            pytest.fail("no Nsight Systems install (scripts/provision_nsys.py)")
        pytest.skip("no Nsight Systems install (scripts/provision_nsys.py)")
    w = make_window(qtbot)
    fill(w, "pool_spawn.py", "2", "spawn")
    w.panel.nsys.setChecked(True)
    # while it runs: main at the root, nsys's processes in their group
    start_nsys_run(qtbot, w, lambda w: _main_at_root(w) and NSYS_GROUP in w.tree.group_items)
    wait_report(qtbot, w, timeout=400_000)
    assert w.last_result.status == "exited", w.console.plain_text()[-2000:]
    w.tick()
    group = w.tree.group_items[NSYS_GROUP]
    members = {w.model.procs[int(group.child(i).text(0))].name for i in range(group.childCount())}
    assert "nsys" in members and members <= {"nsys", "nsys-launcher", "nsys-tee", "QdstrmImporter"}, members
    assert not group.isExpanded()
    roles = {row.role for row in w.model.procs.values() if row.user}
    assert {"main", "pool worker"} <= roles, roles
    nsys_pids = {int(group.child(i).text(0)) for i in range(group.childCount())}
    plotted = {s for (kind, _k, s) in w.live.plots["cpu"].curves if kind == "proc"}
    assert plotted and not plotted & nsys_pids
    assert ("group", "cpu", 0) in w.live.plots["cpu"].curves
    w.bottom.setCurrentWidget(w.tree)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert w.grab().save(str(SHOTS / "live-nsys-grouped.png"))
    assert run_processes(gpuscope_home) == []


def _main_at_root(w) -> bool:
    w.tick()
    mains = [pid for pid, row in w.model.procs.items() if row.role == "main"]
    return bool(mains) and mains[0] in w.tree.items and w.tree.items[mains[0]].parent() is None
