"""The report timeline's lane per GPU: whose work was on it at each moment (SYNTHETIC export)."""

from __future__ import annotations


import numpy as np
import pytest

from gpuscope.nsys.report import load_report
from gpuscope.views import timeline_lod as L
from gpuscope.views import timeline_text as TT
from tests.gpu import synthetic_export as sx
from tests.gpu.test_sharing import US, sliced


def test_layout_has_a_lane_per_gpu_above_the_processes(tmp_path):
    tl = load_report(sliced("2024.2", tmp_path), use_cache=False).timeline
    layout = L.build_layout(tl)
    block = layout.processes[0]
    assert block.pid == L.GPUS_PID and [ln.device for ln in block.lanes] == [0, 1]
    assert all(ln.kind == L.KIND_GPU_SHARE for ln in block.lanes)
    lv = block.lanes[0].rows[0].levels[0]
    assert list(zip((lv.start // US).tolist(), (lv.end // US).tolist())) == [
        (0, 10), (12, 22), (24, 34), (36, 46), (48, 58)]
    row = block.lanes[0].rows[0]
    assert [row.label(i, tl.strings.values) for i in range(5)] == ["pid 101", "pid 202"] * 2 + ["pid 101"]
    assert row.color[0] != row.color[1] and row.color[0] == row.color[2]
    d = TT.range_details(layout, block.lanes[0], row, 1, {})
    assert (d["kind"], d["pid"], d["device"], d["duration_ns"]) == ("gpu_share", 202, 0, 10 * US)
    assert sorted(b.pid for b in layout.processes[1:]) == [101, 202, 303]


def test_several_processes_at_once_are_one_dark_stretch(tmp_path):
    ex = sx.Export(kernels=[sx.Kernel(1, 0, 0, 10 * US), sx.Kernel(2, 0, 5 * US, 15 * US)])
    tl = load_report(sx.write(tmp_path / "o.sqlite", ex, "2023.4"), use_cache=False).timeline
    row = L.build_layout(tl).processes[0].lanes[0].rows[0]
    lv = row.levels[0]
    assert list(zip((lv.start // US).tolist(), (lv.end // US).tolist())) == [(0, 5), (5, 10), (10, 15)]
    assert row.color[1] == L.SEVERAL_COLOR and row.label(1, tl.strings.values) == "several processes at once"


def test_no_gpu_work_no_gpu_block(tmp_path):
    from gpuscope.trace.timeline import Timeline

    assert L.gpu_share_block(Timeline()) is None


@pytest.mark.gui
def test_the_lane_is_drawn_in_each_process_colour(tmp_path, qtbot):
    from gpuscope.app.timeline.qt_timeline import AXIS_H, GUTTER, QtTimeline

    tl = load_report(sliced("2024.2", tmp_path), use_cache=False).timeline
    w = QtTimeline(tl)
    qtbot.addWidget(w)
    w.resize(900, 300)
    w.show()
    w.set_view(0, 60 * US)
    img = w.grab().toImage()
    lane = next(s for s in w.slots() if s.lane is not None and s.lane.kind == L.KIND_GPU_SHARE)
    y = AXIS_H + lane.y + lane.h // 2
    px = (w.width() - GUTTER) / (60 * US)

    def rgb(t_ns: float) -> int:
        return img.pixel(int(GUTTER + t_ns * px), y) & 0xFFFFFF

    row = lane.row
    assert rgb(5 * US) == int(row.color[0]) & 0xFFFFFF       # pid 101's colour inside its first kernel
    assert rgb(17 * US) == int(row.color[1]) & 0xFFFFFF      # pid 202's inside its first
    assert rgb(11 * US) not in (int(row.color[0]) & 0xFFFFFF, int(row.color[1]) & 0xFFFFFF)   # the gap
    assert np.uint32(row.color[0]) != np.uint32(row.color[1])
