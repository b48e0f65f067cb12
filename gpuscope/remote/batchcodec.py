"""The live stream's compact form of telemetry batches: a process row that did not change since
the previous batch of the same watch is sent as its pid alone (most rows of an idle pool).

A watch asks for it with ``compact: true``; :class:`BatchReader` (one per watch) makes the
:class:`SampleBatch` back. Without it, a batch event is ``SampleBatch.to_dict()`` as it is.
"""

from __future__ import annotations

from typing import Any

from gpuscope.telemetry.batch import SampleBatch

__all__ = ["BatchReader", "BatchWriter"]


class BatchWriter:
    """The sending side of one watch: replaces unchanged process rows by their pid."""

    def __init__(self) -> None:
        self._prev: dict[int, list[Any]] = {}

    def write(self, batch: dict[str, Any]) -> dict[str, Any]:
        rows: list[Any] = []
        seen: dict[int, list[Any]] = {}
        for row in batch.get("processes") or ():
            pid = row[0]
            seen[pid] = row
            rows.append(pid if self._prev.get(pid) == row else row)
        self._prev = seen
        return dict(batch, processes=rows)


class BatchReader:
    """The receiving side of one watch (a new one for each ``watch_run``): full batches back."""

    def __init__(self) -> None:
        self._prev: dict[int, list[Any]] = {}

    def expand(self, data: dict[str, Any]) -> dict[str, Any]:
        """The batch's plain ``to_dict()`` form."""
        rows = [self._prev[r] if isinstance(r, int) else r for r in data.get("processes") or ()]
        self._prev = {row[0]: row for row in rows}
        return dict(data, processes=rows)

    def read(self, data: dict[str, Any]) -> SampleBatch:
        return SampleBatch.from_dict(self.expand(data))
