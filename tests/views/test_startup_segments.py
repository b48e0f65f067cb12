"""The start-up chart's segments without Qt: named for the work that ends at the later instant."""

from __future__ import annotations

from gpuscope.views.startup_segments import describe, legend, segments

SPAWN = [("start() called", 0.0), ("process created", 4.0), ("gpuscope's hook", 9.0), ("interpreter ready", 17.0),
         ("__main__ re-imported", 262.0), ("first task received", 270.0)]


def test_each_segment_is_the_work_before_its_end():
    segs = segments(SPAWN)
    assert [(s.name, s.start_ms, s.end_ms) for s in segs] == [
        ("starting the process", 0.0, 4.0), ("interpreter start-up", 4.0, 9.0), ("gpuscope's hook", 9.0, 17.0),
        ("re-importing __main__", 17.0, 262.0), ("waiting for the first task", 262.0, 270.0)]
    assert describe(segs[3], "start() called") == ("re-importing __main__: 245.0 ms "
                                                   "(from 17.0 to 262.0 ms after “start() called”)")


def test_without_a_hook_instant_the_interpreter_takes_the_whole_stretch():
    segs = segments([("start() called", 0.0), ("process created", 1.0), ("interpreter ready", 30.0),
                     ("something new", 31.0)])
    assert [s.name for s in segs] == ["starting the process", "interpreter start-up", "until something new"]
    assert segments([("start() called", 0.0)]) == []


def test_legend_lists_each_drawn_name_once_in_order():
    fork = [("start() called", 0.0), ("process created", 1.0), ("interpreter ready", 1.1), ("process bootstrap", 2.0)]
    assert legend([fork, SPAWN]) == ["starting the process", "interpreter start-up", "gpuscope's hook",
                                     "re-importing __main__", "process bootstrap", "waiting for the first task"]
    odd = [("start() called", 0.0), ("something new", 2.0), ("process created", 3.0)]
    assert legend([odd]) == ["starting the process", "until something new"]     # unknown names last
