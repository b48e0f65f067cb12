"""A sampler listener that writes batches into the run store, about once a second.

Batches collect in memory and go to SQLite in one transaction (``executemany``) when the oldest
pending one is ``flush_s`` old, so a crash of gpuscope loses at most about a second of samples.
The process summary (names, totals, peaks) is rewritten at each flush. The store (and the run's
series row) is opened at the second batch: not while the run starts, when the run's own store
writes and gpuscope's imports compete with it, and not at the end of a short program, which would
wait for it (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import time
import sqlite3

from gpuscope.store import db, samples
from gpuscope.telemetry import log
from gpuscope.telemetry.batch import SampleBatch

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable


# A store that keeps failing (disk full, locked for long) must not grow memory without bound.
MAX_PENDING = 600


class StoreWriter:
    """Call with each batch (a sampler listener); :meth:`close` flushes the rest."""

    def __init__(self, store: sqlite3.Connection | str | Path | None, run_id: str, *, interval_s: float,
                 root_pid: int | None = None, flush_s: float = 1.0,
                 summary: Callable[[], dict[int, dict[str, Any]]] | None = None,
                 gpu_reason: str = "") -> None:
        self._own = not isinstance(store, sqlite3.Connection)
        self._store = store
        self.conn: Any = None if self._own else store
        self.series: int | None = None
        self.run_id = run_id
        self.flush_ns = int(flush_s * 1e9)
        self._summary = summary
        self._pending: list[SampleBatch] = []
        self._notes: list[str] = []
        self._failed = False
        self.rows_written = 0
        self.flushes = 0
        self._interval_s, self._root_pid, self._gpu_reason = interval_s, root_pid, gpu_reason
        self._anchor = (time.monotonic_ns(), time.time_ns())

    def _open(self) -> None:
        """The store connection (if this writer opens its own) and the run's series row."""
        if self.conn is None:
            self.conn = db.connect(None if isinstance(self._store, sqlite3.Connection) else self._store)
        if self.series is None:
            self.series = samples.open_series(self.conn, self.run_id, interval_s=self._interval_s,
                                              anchor_mono_ns=self._anchor[0], anchor_wall_ns=self._anchor[1],
                                              root_pid=self._root_pid, info={"gpu": self._gpu_reason})

    def __call__(self, batch: SampleBatch) -> None:
        self._pending.append(batch)
        self._notes.extend(batch.notes)
        if batch.t_ns - self._pending[0].t_ns >= self.flush_ns:
            self.flush()
        elif self.series is None and len(self._pending) == 2 and not self._failed:
            self._open_early()

    def _open_early(self) -> None:
        """At the second batch (the run's start is over by then), the store and the series row, so
        that a program shorter than ``flush_s`` does not wait for them at its end."""
        try:
            self._open()
        except (sqlite3.Error, OSError):
            pass   # the flush tries again, and says what is wrong

    def flush(self) -> None:
        """Write what is pending (one transaction)."""
        if not self._pending and not self._notes:
            return
        summary = self._summary() if self._summary is not None else None
        try:
            self._open()
            assert self.series is not None   # _open made it
            self.rows_written += samples.write_batches(self.conn, self.series, self._pending, summary,
                                                       self._notes)
        except (sqlite3.Error, OSError) as exc:
            if not self._failed:
                self._failed = True
                log().warning("telemetry samples not stored (will retry): %s", exc)
            del self._pending[:-MAX_PENDING]
            return
        self.flushes += 1
        self._pending, self._notes = [], []

    def close(self) -> None:
        """Flush and release the connection if this writer opened it."""
        self.flush()
        if self.series is None:   # nothing was sampled: the series row still says what the sampler had
            try:
                self._open()
            except (sqlite3.Error, OSError) as exc:
                log().warning("telemetry series not stored: %s", exc)
        if self._own and self.conn is not None:
            self.conn.close()
