"""Integer columns of an nsys export's table, decoded from the SQLite file's pages (the fast path).

SQLite hands rows out one value at a time; getting 10^6 rows of an NVTX table out through
``sqlite3`` costs a Python object per value (``group_concat`` text, ``fetchall`` tuples), which made
reading an export slower than ``nsys stats`` running its query inside SQLite. An export is a
plain, finished SQLite file, so its table b-tree can be read directly (the file format is SQLite's
documented, stable on-disk format, https://www.sqlite.org/fileformat2.html): the compiled decoder
(``_pagescan.c``, built by ``pip install`` where a C compiler is found) walks the table's b-tree
from its root page to the leaves and decodes every leaf cell's record, every offset bounds-checked.

This is one of the two read paths of an export; the other is ``sqlite3``
(:func:`gpuscope.nsys.nvtx_columns.sql_columns`), which gives the same :class:`Columns`. Anything
unusual returns None here and the caller takes the ``sqlite3`` path: the decoder not built or
turned off (``GPUSCOPE_NO_COMPILED=1``, ``GPUSCOPE_NO_PAGE_READER=1``), a WAL-mode file, a
``WITHOUT ROWID`` table, a wanted column that is the rowid alias, a cell whose payload spills onto
overflow pages, a float or text where an integer was expected, a damaged b-tree.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

_pagescan: ModuleType | None
try:
    from gpuscope.nsys import _pagescan  # type: ignore[attr-defined,no-redef]
except ImportError:   # not built (no C compiler at install time): exports are read through sqlite3
    _pagescan = None


@dataclass
class Columns:
    """Decoded columns: ``values[name]`` int64 (NULL read as 0), ``null[name]`` bool, ``rowid``."""

    rowid: np.ndarray
    values: dict[str, np.ndarray]
    null: dict[str, np.ndarray]

    def get(self, name: str, default: int) -> np.ndarray:
        """The column with NULLs replaced by ``default``."""
        v = self.values[name]
        return np.where(self.null[name], default, v) if self.null[name].any() else v


def enabled() -> bool:
    return not os.environ.get("GPUSCOPE_NO_PAGE_READER")


def compiled() -> bool:
    """Whether the compiled decoder is built and not turned off (else exports go through sqlite3)."""
    return enabled() and _pagescan is not None and not os.environ.get("GPUSCOPE_NO_COMPILED")


def read_columns(conn: sqlite3.Connection, table: str, names: list[str],
                 nullness: tuple[str, ...] = ()) -> Columns | None:
    """Integer columns ``names`` (and only the NULL-ness of ``nullness``) of ``table``, or None.

    Columns the table lacks are left out of the result; the caller supplies its defaults.
    """
    if not compiled():
        return None
    row = conn.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (table,)).fetchone()
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if row is None or not path or not row[0] or "WITHOUT ROWID" in (row[1] or "").upper():
        return None
    info = conn.execute(f"PRAGMA table_info({table})").fetchall()
    order = [r[1] for r in info]
    wanted = [n for n in list(names) + list(nullness) if n in order]
    for r in info:   # an INTEGER PRIMARY KEY is stored as NULL in the record (it is the rowid)
        if r[5] and r[1] in wanted:
            return None
    try:
        return _read(Path(path), int(row[0]), order, [n for n in names if n in order],
                     [n for n in nullness if n in order])
    except (OSError, ValueError, IndexError):
        return None


def rowid_range(conn: sqlite3.Connection, table: str) -> tuple[int | None, int | None]:
    """(min(rowid), max(rowid)) of a table in two O(log n) lookups."""
    return (conn.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0],
            conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0])


def rowids_agree(conn: sqlite3.Connection, table: str, rowid: np.ndarray) -> bool:
    """Decoded rowids rise strictly and run from SQLite's own min(rowid) to its max(rowid), each
    read from an edge of the b-tree: cheap, unlike a count(*), which reads every page (and unlike
    one ``SELECT min(rowid), max(rowid)``, which SQLite answers by a full scan too)."""
    lo, hi = rowid_range(conn, table)
    if not len(rowid):
        return lo is None
    return lo == int(rowid[0]) and hi == int(rowid[-1]) and bool((rowid[1:] > rowid[:-1]).all())


def _read(path: Path, root: int, order: list[str], names: list[str], nullness: list[str]) -> Columns | None:
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < 512:
            return None
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    u8 = np.frombuffer(mm, dtype=np.uint8)
    head = bytes(u8[:100])
    if head[:16] != b"SQLite format 3\x00" or head[18] != 1 or head[19] != 1:
        return None   # WAL mode (pages may live in the -wal file) or an unknown format
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    return _read_compiled(u8, page_size, page_size - head[20], root, order, names, nullness)


def _read_compiled(u8: np.ndarray, page_size: int, usable: int, root: int, order: list[str], names: list[str],
                   nullness: list[str]) -> Columns | None:
    decoder = _pagescan
    if decoder is None:
        return None
    k = max(order.index(n) for n in names + nullness) + 1
    kinds = bytearray(k)
    for n in names:
        kinds[order.index(n)] = 1
    for n in nullness:
        kinds[order.index(n)] = 2
    n = decoder.cells(u8, page_size, root)
    if n < 0:
        return None   # a layout the decoder does not take
    values = np.empty((kinds.count(1), n), dtype=np.int64)
    nulls = np.empty((k - kinds.count(0), n), dtype=np.bool_)
    out = Columns(rowid=np.empty(n, dtype=np.int64), values={}, null={})
    if decoder.scan(u8, page_size, usable, root, bytes(kinds), out.rowid, values, nulls):
        return None   # a layout, an overflowing cell or a value type the decoder does not take
    vi = ni = 0
    for j in range(k):
        if kinds[j] == 1:
            out.values[order[j]] = values[vi]
            vi += 1
        if kinds[j]:
            out.null[order[j]] = nulls[ni]
            ni += 1
    return out
