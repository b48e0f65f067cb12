"""A run's wall time cut into parts (gpuscope/analysis/wall_parts.py) on given boundaries: the parts
follow each other, add up to the wall time, give a missing boundary's time to the next part, never
go negative, and a run without any task is the main program in one part (real runs:
tests/runs/test_compare_reimport.py)."""

from __future__ import annotations

import pytest

from gpuscope.analysis.wall_parts import PARTS, CriticalPath, wall_parts
from gpuscope.trace.events import ProcessEvents

MS = 1_000_000
WALL0 = 1_700_000_000_000_000_000   # the wall clock when the monotonic clock read 0


def _root(start_ms: float, end_ms: float | None) -> ProcessEvents:
    pe = ProcessEvents("/x/1-1.log", {"pid": 1, "ppid": 0, "role": "main", "anchor_mono_ns": int(start_ms * MS),
                                      "anchor_wall_ns": WALL0 + int(start_ms * MS)})
    pe.end_ns = None if end_ms is None else int(end_ms * MS)
    return pe


def _at(ms: float) -> int:
    return int(ms * MS)


def test_parts_follow_each_other_and_add_up_to_the_wall_time():
    path = CriticalPath(_root(30, 990), first_start_call=_at(430), worker_created=_at(432), hook_start=_at(480),
                        ready=_at(485), bootstrap=_at(885), first_task=_at(886), last_task_end=_at(950))
    parts = wall_parts(path, WALL0, WALL0 + _at(1000))
    assert parts == pytest.approx({"launch": 30, "main_before_workers": 400, "process_start": 2, "interpreter": 48,
                                   "hook": 5, "main_reimport": 400, "to_first_task": 1, "tasks": 64,
                                   "after_tasks": 40, "finish": 10})
    assert list(parts) == [p.name for p in PARTS if p.name in parts]      # in the order of the path
    assert sum(parts.values()) == pytest.approx(1000)


def test_a_missing_boundary_gives_its_time_to_the_next_part():
    """Fork: no hook (its segment is 0, the interpreter part ends at "ready"); a main without an exit
    record: its end goes to the finish. Clocks read moments apart never make a part negative."""
    path = CriticalPath(_root(30, None), first_start_call=_at(430), worker_created=_at(432), ready=_at(431),
                        bootstrap=_at(434), first_task=_at(440), last_task_end=_at(500))
    parts = wall_parts(path, WALL0, WALL0 + _at(600))
    assert parts["hook"] == 0 and parts["interpreter"] == 0 and parts["main_reimport"] == pytest.approx(2)
    assert parts["after_tasks"] == 0 and parts["finish"] == pytest.approx(100)
    assert min(parts.values()) >= 0 and sum(parts.values()) == pytest.approx(600)


def test_without_a_task_the_main_program_is_one_part():
    parts = wall_parts(CriticalPath(_root(25, 700), first_start_call=_at(300)), WALL0, WALL0 + _at(720))
    assert parts == pytest.approx({"launch": 25, "main": 675, "finish": 20})
    assert wall_parts(CriticalPath(_root(25, 700)), None, WALL0) == {}    # a run that never ended
