"""Integer columns of an nsys export's table, decoded from the SQLite file's pages by numpy.

SQLite hands rows out one value at a time; getting 10^6 rows of an NVTX table out through
``sqlite3`` costs about 0.1 µs per value (``group_concat`` text) or more (``fetchall`` tuples), which
made reading an export slower than ``nsys stats`` running its query inside SQLite. An export is a
plain, finished SQLite file, so its table b-tree can be read directly (the file format is SQLite's
documented, stable on-disk format, https://www.sqlite.org/fileformat2.html):

1. the table's root page (from ``sqlite_master``) is walked down its interior pages to the leaf
   pages, in rowid order;
2. every leaf cell's offset comes from the pages' cell-pointer arrays (vectorised over all pages);
3. each cell's payload length, rowid and record header are varints, decoded vectorised;
4. the first ``K`` serial types of every record (one byte each for integers, NULLs and short
   texts) are gathered as an ``n × K`` byte matrix; their sizes give every value's offset;
5. each wanted integer column is gathered as 8 bytes per row, read as a big-endian int64 and
   shifted right by ``64 - 8·width`` (which sign-extends, as SQLite's 1..8-byte integers need).

Anything unusual returns None and the caller reads through ``sqlite3`` instead (the reference
path, kept tested): a WAL-mode or encrypted-looking file, a ``WITHOUT ROWID`` table, a wanted
column that is the rowid alias, a cell whose payload spills onto overflow pages, a float or text
where an integer was expected, a record whose header uses multi-byte serial types before the last
wanted column (a text of 58+ bytes, say) on more than ``IRREGULAR_MAX`` rows (fewer are decoded one
by one in Python). ``GPUSCOPE_NO_PAGE_READER=1`` turns this module off.

The same decoding is compiled in ``_pagescan.c`` (built by ``pip install`` where a C compiler is
found; optional): one pass over the cells in C, about 10x less CPU than the numpy steps above, and
no limit on irregular headers. Where it is built it is used (``compiled()``); ``GPUSCOPE_NO_COMPILED=1``
keeps to numpy. The two are tested to decode the same values on the same files.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    from gpuscope.nsys import _pagescan
except ImportError:   # not built (no C compiler at install time): the numpy decoder below
    _pagescan = None

IRREGULAR_MAX = 20_000
_WIDTH = np.zeros(256, dtype=np.int64)     # bytes of an integer value, by serial type
_WIDTH[[1, 2, 3, 4, 5, 6]] = [1, 2, 3, 4, 6, 8]
_SIZE = _WIDTH.copy()                       # bytes of any value, by serial type (< 128)
_SIZE[7] = 8
for _t in range(12, 256):
    _SIZE[_t] = (_t - 12) // 2 if _t % 2 == 0 else (_t - 13) // 2


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


class _Bytes:
    """The file as bytes (``u8``) and as overlapping big-endian 8-byte words (``word(pos)``: one
    gather reads the 8 bytes at each position, unaligned, instead of eight one-byte gathers)."""

    def __init__(self, mm) -> None:
        self.u8 = np.frombuffer(mm, dtype=np.uint8)
        self.words = np.ndarray(shape=(len(self.u8) - 7,), dtype=">u8", buffer=mm, offset=0, strides=(1,))

    def __len__(self) -> int:
        return len(self.u8)

    def __getitem__(self, pos):
        return self.u8[pos]

    def word(self, pos: np.ndarray) -> np.ndarray:
        """uint64 of the 8 bytes at each position, first byte most significant (zeros past EOF)."""
        last = len(self.words) - 1
        if not len(pos) or int(pos.max()) <= last:
            return self.words[pos].astype(np.uint64)
        out = self.words[np.minimum(pos, last)].astype(np.uint64)
        for i in np.flatnonzero(pos > last).tolist():
            tail = bytes(self.u8[int(pos[i]):]) + bytes(8)
            out[i] = int.from_bytes(tail[:8], "big")
        return out


def enabled() -> bool:
    return not os.environ.get("GPUSCOPE_NO_PAGE_READER")


def compiled() -> bool:
    """Whether the compiled decoder is built and not turned off: reading pages is then cheap
    enough to replace SQL scans (the summary reader asks)."""
    return enabled() and _pagescan is not None and not os.environ.get("GPUSCOPE_NO_COMPILED")


def read_columns(conn: sqlite3.Connection, table: str, names: list[str],
                 nullness: tuple[str, ...] = ()) -> Columns | None:
    """Integer columns ``names`` (and only the NULL-ness of ``nullness``) of ``table``, or None.

    Columns the table lacks are left out of the result; the caller supplies its defaults.
    """
    if not enabled():
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
        buf = _Bytes(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
    head = bytes(buf.u8[:100])
    if head[:16] != b"SQLite format 3\x00" or head[18] != 1 or head[19] != 1:
        return None   # WAL mode (pages may live in the -wal file) or an unknown format
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - head[20]
    if compiled():
        return _read_compiled(buf, page_size, usable, root, order, names, nullness)
    leaves = _leaf_pages(buf, root, page_size)
    if leaves is None:
        return None
    cells = _cell_offsets(buf, leaves, page_size)
    payload, n1 = varint(buf, cells)
    if len(payload) and int(payload.max()) > usable - 35:
        return None   # some cell spills onto overflow pages
    rowid, n2 = varint(buf, cells + n1)
    hdr = cells + n1 + n2
    hsize, n3 = varint(buf, hdr)
    k = max(order.index(n) for n in names + nullness) + 1
    types = _serial_types(buf, hdr + n3, hsize - n3, k)
    if types is None:
        return None
    out = Columns(rowid=rowid, values={}, null={})
    want = {order.index(n): n for n in names}
    off = hdr + hsize                        # offset of column j's value, column by column
    for j in range(k):
        t = types[j]
        if j in want:
            if ((t == 7) | (t >= 10)).any():
                return None   # a float, text or blob where an integer was expected
            out.values[want[j]] = _integers(buf, off, t)
            out.null[want[j]] = t == 0
        if j + 1 < k:
            off = off + (_SIZE[t] if t.dtype == np.uint8 else _sizes_any(t))
    for name in nullness:
        out.null[name] = types[order.index(name)] == 0
    return out


def _read_compiled(buf: _Bytes, page_size: int, usable: int, root: int, order: list[str], names: list[str],
                   nullness: list[str]) -> Columns | None:
    k = max(order.index(n) for n in names + nullness) + 1
    kinds = bytearray(k)
    for n in names:
        kinds[order.index(n)] = 1
    for n in nullness:
        kinds[order.index(n)] = 2
    n = _pagescan.cells(buf.u8, page_size, root)
    if n < 0:
        return None   # a layout the decoder does not take
    values = np.empty((kinds.count(1), n), dtype=np.int64)
    nulls = np.empty((k - kinds.count(0), n), dtype=np.bool_)
    out = Columns(rowid=np.empty(n, dtype=np.int64), values={}, null={})
    if _pagescan.scan(buf.u8, page_size, usable, root, bytes(kinds), out.rowid, values, nulls):
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


def varint(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SQLite varints (1..9 bytes, big-endian 7-bit groups, the 9th byte whole) at ``pos``."""
    b = buf[pos].astype(np.int64)
    val = b & 0x7F
    length = np.ones(len(pos), dtype=np.int64)
    idx = np.flatnonzero(b >= 0x80)
    step = 1
    while len(idx):
        b = buf[pos[idx] + step].astype(np.int64)
        length[idx] += 1
        if step == 8:
            val[idx] = (val[idx] << 8) | b
            break
        val[idx] = (val[idx] << 7) | (b & 0x7F)
        idx = idx[b >= 0x80]
        step += 1
    return val, length


def _page(buf: np.ndarray, number: int, page_size: int) -> tuple[int, int]:
    """(file offset of the page, offset of its b-tree header: 100 on page 1)."""
    base = (number - 1) * page_size
    return base, base + (100 if number == 1 else 0)


def _leaf_pages(buf: np.ndarray, root: int, page_size: int) -> np.ndarray | None:
    """Leaf page numbers of a table b-tree, in key order (interior pages walked level by level)."""
    level = np.array([root], dtype=np.int64)
    for _ in range(64):
        kinds = buf.u8[(level - 1) * page_size + np.where(level == 1, 100, 0)]
        if (kinds == 13).all():
            return level
        if not (kinds == 5).all():
            return None   # not a table b-tree, or leaves at different depths
        children = []
        for p in level.tolist():
            base, h = _page(buf, p, page_size)
            n = int(buf[h + 3]) << 8 | int(buf[h + 4])
            ptr = h + 12 + 2 * np.arange(n)
            cell = base + ((buf[ptr].astype(np.int64) << 8) | buf[ptr + 1])
            left = (buf[cell].astype(np.int64) << 24 | buf[cell + 1].astype(np.int64) << 16
                    | buf[cell + 2].astype(np.int64) << 8 | buf[cell + 3])
            right = int.from_bytes(bytes(buf[h + 8:h + 12]), "big")
            children.append(np.r_[left, right])
        level = np.concatenate(children)
    return None


def _cell_offsets(buf: np.ndarray, leaves: np.ndarray, page_size: int) -> np.ndarray:
    """File offset of every cell of the leaf pages, in page then cell-pointer order (rowid order)."""
    base = (leaves - 1) * page_size
    h = base + np.where(leaves == 1, 100, 0)
    count = (buf[h + 3].astype(np.int64) << 8) | buf[h + 4]
    total = int(count.sum())
    first = np.cumsum(count) - count
    within = np.arange(total) - np.repeat(first, count)
    ptr = np.repeat(h + 8, count) + 2 * within
    return np.repeat(base, count) + ((buf[ptr].astype(np.int64) << 8) | buf[ptr + 1])


def _serial_types(buf: _Bytes, start: np.ndarray, length: np.ndarray, k: int) -> np.ndarray | None:
    """The first ``k`` serial types of each record, ``k × n`` (0 = NULL past a short header's end)."""
    n = len(start)
    words = [buf.word(start + 8 * i).byteswap().view(np.uint8).reshape(n, 8) for i in range((k + 7) // 8)]
    raw = np.concatenate(words, axis=1)[:, :k] if len(words) > 1 else words[0][:, :k]
    types = np.where(np.arange(k, dtype=np.int64) < length[:, None], raw, 0).astype(np.uint8).T.copy()
    if len(types) and int(types.max()) < 0x80:
        return types
    types = types.astype(np.int64)   # fast path: every serial type one byte; past the header: NULL
    rows = np.flatnonzero((types >= 0x80).any(axis=0))
    if len(rows) > IRREGULAR_MAX:
        return None
    for i in rows.tolist():
        pos, end, row = int(start[i]), int(start[i] + length[i]), []
        while pos < end and len(row) < k:
            v, ln = varint(buf, np.array([pos]))
            row.append(int(v[0]))
            pos += int(ln[0])
        types[:, i] = row + [0] * (k - len(row))
    return types


def _sizes_any(types: np.ndarray) -> np.ndarray:
    out = np.where(types >= 12, (types - 12) // 2, 0)
    small = types < 12
    out[small] = _SIZE[types[small]]
    return out


_SHIFT = np.full(256, 56, dtype=np.int64)      # 64 - 8·width; width 0: any shift, masked below
_SHIFT[[1, 2, 3, 4, 5, 6]] = [56, 48, 40, 32, 16, 0]
_KEEP = np.zeros(256, dtype=np.int64)          # all ones for integer types, 0 for NULL / 0 / 1
_KEEP[[1, 2, 3, 4, 5, 6]] = -1
_CONST = np.zeros(256, dtype=np.int64)
_CONST[9] = 1


def _integers(buf: _Bytes, off: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Big-endian two's-complement integers of serial types 1..6 (8 -> 0, 9 -> 1, NULL -> 0).

    One 8-byte word per row, its first ``width`` bytes the value: an arithmetic shift right by
    ``64 - 8·width`` drops the bytes after it and sign-extends.
    """
    val = buf.word(off).view(np.int64) >> _SHIFT[t]
    val &= _KEEP[t]
    val |= _CONST[t]
    return val
