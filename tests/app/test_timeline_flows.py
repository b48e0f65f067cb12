"""Flow arrows from a pool job's submission in the parent to each task in the worker that ran it:
the J/T records of real ``gpuscope run`` recordings (spawn and forkserver Pool(2)), their
matching (trace/flows.py) and the arrows the timeline draws."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QColor

from gpuscope.app import workers
from gpuscope.app.report.qt_report_view import QtReportView
from gpuscope.nsys.report import load_report
from gpuscope.trace.events import read_run_events
from gpuscope.trace.flows import run_flows
from tests.app.timeline_support import EPOCHS, TASKS, gpuscope_run, save_shot, write_workload

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module", params=["spawn", "forkserver"])
def pool_run(request, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp(f"flows-{request.param}")
    return {**gpuscope_run(write_workload(folder), home=folder / "home", method=request.param),
            "method": request.param}


def test_every_task_is_tied_to_its_job_submitted_in_the_parent(pool_run):
    run_dir = Path(pool_run["run_dir"])
    logs = read_run_events(run_dir)
    main = next(pe for pe in logs if pe.role == "main")
    workers_ = [pe for pe in logs if pe.role == "pool worker"]
    assert len(main.jobs) == EPOCHS                            # two map_async calls
    assert sum(len(pe.tasks) for pe in workers_) == EPOCHS * TASKS
    tl = load_report(run_dir).timeline
    fl = run_flows(run_dir, tl)
    assert len(fl) == EPOCHS * TASKS
    assert set(fl.src_pid.tolist()) == {main.pid} and set(fl.dst_pid.tolist()) <= {pe.pid for pe in workers_}
    for job in np.unique(fl.job).tolist():                      # each job's 8 tasks exactly once
        assert sorted(fl.task[fl.job == job].tolist()) == list(range(TASKS))
    assert (fl.dst_ns >= fl.src_ns).all()
    # the flow ends where the worker's task range (gpuscope:load_batch) begins: the thread's first
    # task range after it took the task comes before it takes its next task (µs apart on a quiet
    # machine; a loaded one may hold the worker between the two for 0.1 s)
    r = tl.ranges
    doms = tl.domain_names()
    task_ranges = [i for i in range(len(r)) if doms.get((int(r.pid[i]), int(r.domain_id[i]))) == "gpuscope"]
    for k in range(len(fl)):
        same_thread = (fl.dst_pid == fl.dst_pid[k]) & (fl.dst_tid == fl.dst_tid[k]) & (fl.dst_ns > fl.dst_ns[k])
        next_take = int(fl.dst_ns[same_thread].min()) if same_thread.any() else None
        mine = [i for i in task_ranges if r.pid[i] == fl.dst_pid[k] and r.tid[i] == fl.dst_tid[k]]
        starts = [int(r.start_ns[i]) for i in mine if r.start_ns[i] >= fl.dst_ns[k]]
        assert starts, k
        assert next_take is None or min(starts) < next_take, (k, min(starts) - int(fl.dst_ns[k]))


def test_report_view_draws_the_arrows(qtbot, pool_run, tmp_path):
    rv = QtReportView()
    qtbot.addWidget(rv)
    rv.resize(1300, 800)
    rv.show()
    try:
        with qtbot.waitSignal(rv.sigLoaded, timeout=60_000):
            rv.show_run(pool_run["run_dir"])
        view = rv.timeline
        fl = view.flows
        assert fl is not None and len(fl) == EPOCHS * TASKS
        # zoomed on the second job: its arrows are drawn, the first job's are off screen
        second = fl.job == fl.job.max()
        a, b = float(fl.src_ns[second].min()), float(fl.dst_ns[second].max())
        view.set_view(a - (b - a) * 0.05, b + (b - a) * 0.1)
        shown = view.visible_flows()
        assert set(np.flatnonzero(second).tolist()) <= set(shown.tolist())
        img = view.grab().toImage()
        k = int(np.flatnonzero(second)[0])
        xb = 200 + (int(fl.dst_ns[k]) - view.view_range()[0]) / view.ns_per_px
        yb = view.flow_y(int(fl.dst_pid[k]), int(fl.dst_tid[k]))
        tip = QColor(img.pixel(int(xb - 3), int(yb)))
        assert max(tip.red(), tip.green(), tip.blue()) < 160, tip.name()     # the dark arrowhead
        if pool_run["method"] == "spawn":     # the documented picture; the forkserver one stays in tmp
            save_shot(view, "timeline-flows.png", tmp_path)
        else:
            assert view.grab().save(str(tmp_path / "timeline-flows-forkserver.png"))
    finally:
        assert workers.wait_all(30_000)
