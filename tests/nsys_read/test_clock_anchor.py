"""Event-log times go onto an nsys report's wall-clock base with one CLOCK_REALTIME - CLOCK_MONOTONIC
difference for the whole run (the median of the logs' anchor pairs), so one process whose pair was
read across a preemption does not move all of its ranges (a flow 4 ms before its task's range in a
loaded suite)."""

from __future__ import annotations

import json

from gpuscope.trace import timeline as T
from gpuscope.trace.coverage import add_process_events, wall_minus_mono
from gpuscope.trace.events import read_run_events

WALL_MINUS_MONO = 1_700_000_000_000_000_000


def _log(folder, pid: int, mono: int, late_ns: int, t0: int) -> None:
    """A process anchored at ``mono``, its wall clock read ``late_ns`` after its monotonic one, with
    one range at monotonic ``t0``."""
    head = {"pid": pid, "ppid": 1, "role": "pool worker", "anchor_mono_ns": mono,
            "anchor_wall_ns": mono + WALL_MINUS_MONO + late_ns}
    (folder / f"{pid}-{mono}.log").write_text(
        "H\t" + json.dumps(head) + "\nS\t0\tnvtx\t\ttask\t\n" + f"R\t{t0}\t{t0 + 1000}\t{pid}\t0\t\n")


def test_one_late_anchor_pair_does_not_move_its_process(tmp_path):
    (tmp_path / "events").mkdir()
    for pid, late in ((10, 0), (11, 3_000), (12, 5_000_000), (13, 1_000)):   # 12: preempted 5 ms
        _log(tmp_path / "events", pid, 1_000_000_000 + pid, late, 2_000_000_000)
    logs = read_run_events(tmp_path)
    assert wall_minus_mono(logs) - WALL_MINUS_MONO in (1_000, 3_000)
    tl = T.Timeline()
    tl.wall_base_ns = WALL_MINUS_MONO + 1_500_000_000     # the session started at monotonic 1.5 s
    add_process_events(tl, logs)
    starts = {int(p): int(s) for p, s in zip(tl.ranges.pid, tl.ranges.start_ns)}
    # every process's range at monotonic 2 s is 0.5 s into the session, within the good pairs' µs
    assert all(abs(s - 500_000_000) <= 3_000 for s in starts.values()), starts
    assert sorted(starts) == [10, 11, 12, 13]
