"""The offset from the profiler's clock to gpuscope's, from the clock marks (arithmetic only)."""

from __future__ import annotations

from gpuscope.inject.torchprof import clock_from_marks


def test_the_tightest_mark_gives_the_offset_and_its_uncertainty():
    # profiler clock = monotonic + 1000; mark 1 is loose (window 100, dur 10), mark 2 tight (window 12, dur 8)
    marks = [(5_000, 5_100), (6_000, 6_012)]
    events = [(5_000 + 1_000 + 40, 10), (6_000 + 1_000 + 2, 8)]
    clock = clock_from_marks(marks, events)
    assert clock["clock_method"] == "marker"
    assert clock["clock_uncertainty_ns"] == 2            # the begin lies in [6000, 6004]
    assert abs(clock["clock_offset_ns"] - (-1_000)) <= clock["clock_uncertainty_ns"]


def test_no_mark_recorded_gives_no_offset():
    assert clock_from_marks([(1, 2)], [])["clock_offset_ns"] is None
