"""The timeline of a real ``gpuscope run --nsys`` recording (spawn Pool(2), nvtx+osrt+cuda traces):
OS runtime calls get a lane per thread (none without an OSRT table), and a range name has one
label and one colour in the nsys report and in the same run's event-log report."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from gpuscope.views import timeline_lod as L
from gpuscope.app.timeline.qt_timeline import QtTimeline
from gpuscope.nsys.report import load_events, load_report
from tests.app.timeline_support import EPOCHS, TASKS, nsys_available, nsys_run, save_shot, write_workload

pytestmark = [pytest.mark.gui, pytest.mark.nsys,
              pytest.mark.skipif(not nsys_available() and os.environ.get("CI") != "true",
                                 reason="Nsight Systems not provisioned (scripts/provision_nsys.py)")]


@pytest.fixture(scope="module")
def nsys_spawn(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("nsyslanes")
    run = nsys_run(write_workload(folder), home=folder / "home")
    return Path(run["run_dir"])


def _labels_and_colours(layout) -> dict[int, tuple[str, int]]:
    """NVTX range index -> (label drawn, colour drawn), read from the laid-out rows."""
    out = {}
    tl = layout.timeline
    for b in layout.processes:
        for lane in b.lanes:
            if lane.kind != L.KIND_NVTX:
                continue
            for row in lane.rows:
                for pos, ref in enumerate(row.ref.tolist()):
                    out[ref] = (row.label(pos, tl.strings.values), int(row.color[pos]) & 0xFFFFFF)
    return out


def _by_label(layout) -> dict[str, set[int]]:
    seen: dict[str, set[int]] = {}
    for label, colour in _labels_and_colours(layout).values():
        seen.setdefault(label, set()).add(colour)
    return seen


@pytest.mark.timeout(300)
def test_one_label_and_colour_per_name_in_nsys_and_event_log_reports(nsys_spawn):
    nsys = L.build_layout(load_report(nsys_spawn, use_cache=False).timeline)
    logs = L.build_layout(load_events(nsys_spawn).timeline)
    assert nsys.timeline.ranges.source.min() == 0          # nsys's own ranges, not gpuscope's
    a, b = _by_label(nsys), _by_label(logs)
    assert "gpuscope:load_batch" in a and "load_batch" in a
    assert set(a) == set(b)
    for name in a:
        assert len(a[name]) == 1 and a[name] == b[name], (name, a[name], b[name])
    assert a["gpuscope:load_batch"] == {L.palette_color("gpuscope:load_batch") & 0xFFFFFF}
    assert a["load_batch"] == {0x800080}                     # the script's purple
    counts = {}
    for label, _ in _labels_and_colours(nsys).values():
        counts[label] = counts.get(label, 0) + 1
    assert counts["gpuscope:load_batch"] == counts["load_batch"] == EPOCHS * TASKS


@pytest.mark.timeout(300)
def test_os_runtime_calls_get_a_lane_per_thread(qtbot, nsys_spawn, tmp_path):
    report = load_report(nsys_spawn, use_cache=False)
    tl = report.timeline
    assert "OSRT_API" in report.tables and len(tl.osrt) > 0
    w = QtTimeline()
    qtbot.addWidget(w)
    w.resize(1300, 700)
    w.set_timeline(tl)
    w.show()
    qtbot.waitExposed(w)
    lanes = [ln for b in w.layout_model.processes for ln in b.lanes if ln.kind == L.KIND_OSRT]
    threads = set(zip(tl.osrt.pid.tolist(), tl.osrt.tid.tolist()))
    assert {(ln.pid, ln.tid) for ln in lanes} == threads
    assert sum(len(ln.rows[0].ref) for ln in lanes) == len(tl.osrt)
    for b in w.layout_model.processes:       # after the NVTX lanes of the same thread
        kinds = [(ln.tid, ln.kind) for ln in b.lanes]
        for i, (tid, kind) in enumerate(kinds):
            if kind == L.KIND_OSRT:
                assert all(k != L.KIND_NVTX for t, k in kinds[i + 1:] if t == tid)
    k = int(np.argmax(tl.osrt.end_ns - tl.osrt.start_ns))
    w.set_view(float(tl.osrt.start_ns[k]) - 1e5, float(tl.osrt.end_ns[k]) + 1e5)
    pt = w.position_of("osrt", k)
    assert pt is not None
    with qtbot.waitSignal(w.sigRangeSelected, timeout=2000) as sig:
        qtbot.mouseClick(w, Qt.LeftButton, pos=pt.toPoint())
    d = sig.args[0]
    assert d["kind"] == "osrt" and d["name"] == tl.name(tl.osrt.name_id[k]) and d["pid"] == int(tl.osrt.pid[k])
    # the OS runtime summary row of that call highlights all calls of its name
    n = w.highlight_name("osrt", d["name"], report.naming, jump=False)
    assert n == int((tl.osrt.name_id == tl.osrt.name_id[k]).sum())
    w.clear_highlight()
    w.reset_view()
    save_shot(w, "timeline-osrt-lanes.png", tmp_path)
    # without OS runtime calls (the event-log report of the same run) there is no such lane
    logs = L.build_layout(load_events(nsys_spawn).timeline)
    assert not [ln for b in logs.processes for ln in b.lanes if ln.kind == L.KIND_OSRT]


@pytest.mark.timeout(300)
def test_flows_land_on_nsys_task_ranges(nsys_spawn):
    """The J/T records are on gpuscope's clock; on an nsys report's time base each flow still ends
    where nsys's own record of the worker's task range begins."""
    from gpuscope.trace.flows import run_flows

    tl = load_report(nsys_spawn, use_cache=False).timeline
    fl = run_flows(nsys_spawn, tl)
    assert len(fl) == EPOCHS * TASKS
    r = tl.ranges
    doms = tl.domain_names()
    nsys_tasks = np.array([i for i in range(len(r)) if r.source[i] == 0
                           and doms.get((int(r.pid[i]), int(r.domain_id[i]))) == "gpuscope"])
    assert len(nsys_tasks) == EPOCHS * TASKS
    bad = []
    for k in range(len(fl)):
        mine = nsys_tasks[(r.pid[nsys_tasks] == fl.dst_pid[k]) & (r.tid[nsys_tasks] == fl.dst_tid[k])]
        gap = r.start_ns[mine] - fl.dst_ns[k]
        # the range starts after the task was taken (a first task imports nvtx first: ms), never
        # before it by more than the two clocks' alignment (measured: µs)
        if not ((gap > -100_000) & (gap < 20_000_000)).any():
            bad.append((k, int(fl.dst_pid[k]), min(gap.tolist(), key=abs)))
    # all of them, with the worker: one process's flows all off by the same amount would be its
    # clock anchors; one flow alone, its task (seen once under a loaded suite: -4.1 ms)
    assert not bad, (bad, {int(p): int((fl.dst_pid == p).sum()) for p in set(fl.dst_pid.tolist())})
