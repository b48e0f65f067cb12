"""Growable numpy buffers for plotted time series (Qt-free).

A live plot appends one point per series and sampler tick and redraws at ~10 Hz. Appends go
into preallocated arrays that double when full, so a one-hour run at 10 Hz (36,000 points per
series) costs a handful of reallocations; a draw reads a contiguous view without copying.
"""

from __future__ import annotations

import numpy as np


class SeriesBuffer:
    """x (seconds) and y (float, NaN = not measured) for one curve."""

    __slots__ = ("_x", "_y", "n")

    def __init__(self, capacity: int = 1024) -> None:
        self._x = np.empty(capacity, dtype=np.float64)
        self._y = np.empty(capacity, dtype=np.float64)
        self.n = 0

    def append(self, x: float, y: float | None) -> None:
        if self.n == len(self._x):
            self._grow(2 * len(self._x))
        self._x[self.n] = x
        self._y[self.n] = np.nan if y is None else y
        self.n += 1

    def extend(self, x: np.ndarray, y: np.ndarray) -> None:
        need = self.n + len(x)
        if need > len(self._x):
            self._grow(max(need, 2 * len(self._x)))
        self._x[self.n:need] = x
        self._y[self.n:need] = y
        self.n = need

    def _grow(self, capacity: int) -> None:
        for name in ("_x", "_y"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=np.float64)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    @property
    def x(self) -> np.ndarray:
        return self._x[: self.n]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self.n]

    def window(self, x_min: float | None) -> tuple[np.ndarray, np.ndarray]:
        """Views of the points with x >= ``x_min`` (one point earlier, so the line enters the view)."""
        if x_min is None or self.n == 0:
            return self.x, self.y
        i = max(0, int(np.searchsorted(self._x[: self.n], x_min)) - 1)
        return self._x[i: self.n], self._y[i: self.n]

    def last(self) -> float | None:
        return float(self._y[self.n - 1]) if self.n else None


def envelope(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ~``max_points`` points that keep every peak: the min and max of each bucket.

    Buckets are a power of two long and start at index 0, so as the series grows only its last
    bucket changes and the drawn curve does not shimmer from one refresh to the next. NaN
    (not measured) is ignored inside a bucket; a bucket of NaN stays a gap.
    """
    n = len(x)
    pairs = max(1, max_points // 2)
    if n <= max_points:
        return x, y
    bucket = 1 << int(np.ceil(np.log2(n / pairs)))
    m = n // bucket * bucket
    ys = y[:m].reshape(-1, bucket)
    lo, hi = np.fmin.reduce(ys, axis=1), np.fmax.reduce(ys, axis=1)
    xs = x[:m].reshape(-1, bucket)
    out_x = np.empty(2 * len(lo) + (n - m))
    out_y = np.empty_like(out_x)
    out_x[0:2 * len(lo):2], out_x[1:2 * len(lo):2] = xs[:, 0], xs[:, -1]
    out_y[0:2 * len(lo):2], out_y[1:2 * len(lo):2] = lo, hi
    out_x[2 * len(lo):], out_y[2 * len(lo):] = x[m:], y[m:]
    return out_x, out_y
