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
