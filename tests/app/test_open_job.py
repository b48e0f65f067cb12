"""File → Open job: a job folder of node runs opens into the report view as one timeline with one
group of lanes per node (node 0's processes first), the ranks named, the summary of all nodes, and
tabs of the ranks and of the nodes with their clock offsets."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QFileDialog

from tests.app.apphelpers import make_window
from tests.app.timeline_support import save_shot
from tests.runs import jobfolder as J

pytestmark = pytest.mark.gui


def test_open_job_shows_lanes_grouped_per_node(qtbot, tmp_path, monkeypatch):
    job = J.make_job(tmp_path / "job", nnodes=2, nproc=2, steps=40, offsets=[0, 2_000_000_000])
    window = make_window(qtbot)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(job)))
    assert window.open_job_action.text() == "Open &job…"
    with qtbot.waitSignal(window.sigReportLoaded, timeout=60_000) as sig:
        window.open_job_action.trigger()
    report = sig.args[0]
    assert report.job["job_id"] == "synthetic" and window.tabs.currentWidget() is window.report_view
    timeline = window.report_view.timeline
    qtbot.waitUntil(lambda: timeline.layout_model is not None, timeout=30_000)
    labels = [b.label for b in timeline.layout_model.processes]
    # node 0's agent and ranks, then node 1's: the merged pids never show, the real ones do
    assert [lab.split(" · ")[0] for lab in labels] == ["node 0 rank 0", "node 0 rank 1", "node 0 torchrun agent",
                                                        "node 1 rank 2", "node 1 rank 3", "node 1 torchrun agent"]
    assert [lab.split(" · ")[1] for lab in labels] == ["pid 2000", "pid 2001", "pid 1000",
                                                        "pid 2000", "pid 2001", "pid 1001"]
    assert all(b.full_name.endswith(f" · host{i // 3}") for i, b in enumerate(timeline.layout_model.processes))
    assert [timeline.layout_model.timeline.groups[b.pid] for b in timeline.layout_model.processes] == \
        ["node 0 · host0"] * 3 + ["node 1 · host1"] * 3
    nvtx = window.report_view.summary.tables["nvtx"]
    counts = {n: int(c.replace(",", "")) for n, c in zip(nvtx.column_values("Name"), nvtx.column_values("Count"))}
    assert counts == {"train_step": 4 * 40}
    tables = window.report_view.summary.tables
    ranks = tables["ranks"]
    assert ranks.column_values("Rank") == ["0", "1", "2", "3"]
    assert ranks.column_values("Node") == ["0", "0", "1", "1"] and ranks.column_values("Ranges") == ["40"] * 4
    assert ranks.column_values("Steps") == ["40"] * 4 and ranks.column_values("Step median (ms)") == ["0.001"] * 4
    nodes = tables["nodes"]
    assert nodes.column_values("Clock offset (ms)") == ["0.000", "2,000.000"]
    assert nodes.column_values("Residual (ms)") == ["0.000", "0.002"]
    assert nodes.column_values("Clock") == ["self", "host0:1"]
    save_shot(window, "open-job-synthetic.png", tmp_path)
