"""A worker's start-up instants turned into the segments the Compare tab's chart draws (Qt-free).

The comparison gives each worker its instants in order, e.g. ``start() called`` → ``process
created`` → ``gpuscope's hook`` → ``interpreter ready`` → ``__main__ re-imported`` → ``first task
received``. The time between two instants is spent on what leads to the later one, so a segment
is named for that work ("re-importing __main__" ends at "__main__ re-imported"), never for the
instant it starts at.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# the work that ends at an instant (the names follow gpuscope.analysis.wall_parts)
WORK_BEFORE = {
    "process created": "starting the process",
    "gpuscope's hook": "interpreter start-up",
    "interpreter ready": "gpuscope's hook",
    "__main__ re-imported": "re-importing __main__",
    "process bootstrap": "process bootstrap",
    "worker loop ready": "worker set-up",
    "first task received": "waiting for the first task",
    "first range": "until the first range",
}
HOOK = "gpuscope's hook"
READY = "interpreter ready"


@dataclass(frozen=True)
class Segment:
    """The work between two instants: its name and its start and end (ms since the first instant)."""

    name: str
    start_ms: float
    end_ms: float
    until: str          # the instant it ends at

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


def segment_name(before: str, instant: str) -> str:
    """What a worker does between ``before`` and ``instant``."""
    if instant == READY and before != HOOK:
        return "interpreter start-up"       # no hook instant: all of it is the interpreter's
    return WORK_BEFORE.get(instant, f"until {instant}")


def segments(phases: Sequence[tuple[str, float]]) -> list[Segment]:
    """The segments between consecutive instants (none for fewer than two)."""
    return [Segment(segment_name(a, b), t0, t1, b) for (a, t0), (b, t1) in zip(phases, phases[1:])]


ORDER = ("starting the process", "interpreter start-up", "gpuscope's hook", "re-importing __main__",
         "process bootstrap", "worker set-up", "waiting for the first task", "until the first range")


def legend(all_phases: Iterable[Sequence[tuple[str, float]]]) -> list[str]:
    """Every segment name drawn, once, in the order a worker goes through them (names of instants
    this module does not know last, first seen first)."""
    names: list[str] = []
    for phases in all_phases:
        for seg in segments(phases):
            if seg.name not in names:
                names.append(seg.name)
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), names.index(n)))


def describe(seg: Segment, origin: str) -> str:
    """The hover text of a segment: its name and milliseconds, and where it lies."""
    return f"{seg.name}: {seg.ms:.1f} ms (from {seg.start_ms:.1f} to {seg.end_ms:.1f} ms after “{origin}”)"
