"""The timeline's view state without Qt: fit, zoom around a point, pan within the span, what lies
under a position, where an item is drawn, and a highlight that jumps to the longest item."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscope.views import timeline_lod as L
from gpuscope.views.timeline_viewport import AXIS_H, GUTTER, Viewport
from tests.app.timeline_support import synthetic_timeline


@pytest.fixture(scope="module")
def layout():
    return L.build_layout(synthetic_timeline(n_ranges=20_000, n_procs=3, threads=2))


@pytest.fixture
def vp(layout):
    v = Viewport()
    v.set_size(1200, 300, 12)
    v.set_layout(layout)
    v.fit()
    return v


def test_fit_zoom_and_pan_keep_the_time_under_the_pointer(vp, layout):
    t0, t1 = vp.view_range()
    pad = (layout.t_max - layout.t_min) * 0.02
    assert t0 == pytest.approx(layout.t_min - pad) and t1 == pytest.approx(layout.t_max + pad, rel=1e-6)
    assert vp.needs_bar() and vp.plot_width() == 1200 - GUTTER - 12     # the lanes are taller than the view
    x = GUTTER + 300.0
    before = vp.time_at(x)
    vp.zoom(8.0, x)
    assert vp.time_at(x) == pytest.approx(before) and not vp.auto_fit
    assert vp.view_range()[1] - vp.view_range()[0] == pytest.approx((t1 - t0) / 8)
    vp.pan(-1e9)                                      # far past the end: held near the span
    assert vp.view_range()[0] <= layout.t_max
    vp.pan(0, -1e9)
    assert vp.scroll_y == vp.scroll_top() > 0


def test_an_item_is_found_where_it_is_drawn(vp, layout):
    slot = next(s for s in vp.visible_slots() if s.row is not None and s.depth == 2)
    lv = slot.row.levels[0]
    i = 5
    dur = float(lv.end[i] - lv.start[i])
    vp.apply_view(float(lv.start[i]) - dur, float(lv.end[i]) + dur)   # the item a third of the view wide
    index = int(slot.row.ref[i])
    x, y = vp.position_of("nvtx", index)
    assert y == AXIS_H + slot.y - vp.scroll_y + slot.h / 2
    lane, row, pos = vp.item_at(x, y)
    assert row is slot.row and int(row.ref[pos]) == index
    assert vp.item_at(GUTTER - 1, y) is None and vp.item_at(x, AXIS_H - 1) is None


def test_highlight_jumps_to_the_item_and_scrolls_its_lane_into_view(vp, layout):
    tl = layout.timeline
    last_lane = tl.ranges.pid == tl.ranges.pid.max()
    index = np.flatnonzero(last_lane)[:50]
    vp.set_highlight("ranges", index)
    assert vp.highlight is not None and vp.highlight[1].sum() == 50 and vp.hl_rows
    longest = int(index[np.argmax((tl.ranges.end_ns - tl.ranges.start_ns)[index])])
    lane, row, pos = vp.jump_to("ranges", longest)
    assert int(row.ref[pos]) == longest and vp.selected == (lane, row, pos)
    slot = next(s for s in vp.slots if s.row is row)
    assert vp.scroll_y <= slot.y and slot.y + slot.h <= vp.scroll_y + vp.visible_h   # scrolled to it
    t0, t1 = vp.view_range()
    assert t0 < tl.ranges.start_ns[longest] and tl.ranges.end_ns[longest] < t1
    vp.set_highlight("", np.zeros(0, np.int64))
    assert vp.highlight is None and not vp.hl_rows
