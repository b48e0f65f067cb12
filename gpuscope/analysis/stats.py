"""The statistics of a comparison: a spread over repeats, and the one rule for "beyond noise".

The rule (docs/COMPARE.md): two labels differ beyond noise when each has at least two usable
runs, the ``[min, max]`` ranges of their repeats do not overlap, and their medians differ by at
least ``MIN_EFFECT`` (5 %). No p-value: on a noisy shared machine the repeats' own spread is the
noise, measured in the same series, alternated so that the noise falls on both sides. The 5 % floor
keeps two tight but nearly equal spreads (200.3 ms against 200.2 ms over two runs each) from being
called a difference: what a user could act on is never that small.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

MIN_RUNS = 2   # runs per label the rule needs; one run each cannot separate a difference from noise
MIN_EFFECT = 0.05  # medians closer than this (relative) are never a difference


@dataclass(frozen=True)
class Spread:
    """A number over the repeats of one label: its median and the min-max range, and how many runs."""

    median: float
    min: float
    max: float
    n: int = 1

    def to_json(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}

    def overlaps(self, other: "Spread") -> bool:
        return self.min <= other.max and other.min <= self.max


def spread(values: Iterable[float | int | None]) -> Spread | None:
    """The spread of the measured values (None values are not measured); None when none is."""
    got = [float(v) for v in values if v is not None]
    if not got:
        return None
    return Spread(statistics.median(got), min(got), max(got), len(got))


def ratio(first: float | None, other: float | None) -> float | None:
    """``other / first`` (medians); None when either is missing or the first is 0."""
    if first is None or other is None or first == 0:
        return None
    return other / first


def separated(a: Spread | None, b: Spread | None) -> bool:
    """The rule for one pair: both measured over >= MIN_RUNS runs, their ranges do not overlap, and
    their medians differ by at least MIN_EFFECT."""
    if a is None or b is None or a.n < MIN_RUNS or b.n < MIN_RUNS:
        return False
    scale = max(abs(a.median), abs(b.median))
    return not a.overlaps(b) and abs(a.median - b.median) >= MIN_EFFECT * scale


def beyond_noise(spreads: Sequence[Spread | None]) -> bool:
    """Whether some pair of labels differs beyond noise."""
    return any(separated(a, b) for i, a in enumerate(spreads) for b in spreads[i + 1:])


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100, linear interpolation as numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
