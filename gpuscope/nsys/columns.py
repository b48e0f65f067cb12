"""The two read paths of an nsys export's integer columns, and the one choice between them.

1. **pages** (fast): the compiled decoder reads the table's b-tree from the file
   (:mod:`gpuscope.nsys.pages`); used wherever it is built and the file is one it takes.
2. **sqlite3** (fallback, the reference): one ``group_concat`` string per column, parsed by numpy,
   split over up to ``PARALLEL_READERS`` threads with their own read-only connections.

Both give the same :class:`~gpuscope.nsys.pages.Columns` (rowids, values with NULL read as 0,
NULL masks): the Timeline reader and the summary reader consume that, never a path of their own.
Damage that SQLite itself does not notice (a text where an integer belongs, cut rows) becomes one
:class:`UserError` line naming the file and the table.
"""

from __future__ import annotations

import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpuscope.errors import UserError
from gpuscope.nsys import pages
from gpuscope.nsys.pages import Columns

CHUNK_ROWS = 4_000_000            # rows per group_concat string (SQLite caps a string at ~1 GB)
PARALLEL_READERS = max(1, min(4, os.cpu_count() or 1))
PARALLEL_MIN_ROWS = 100_000
MAX_MASKED = 62                   # NULL flags packed into one int64 column


def read(conn: sqlite3.Connection, table: str, names: list[str], nullness: tuple[str, ...] = ()) -> Columns:
    """Columns ``names`` (values and NULL masks) and the NULL masks of ``nullness`` of ``table``,
    in rowid order, from the pages where the decoder takes the file, else through ``sqlite3``.
    Columns the table lacks are left out (the caller supplies its defaults)."""
    got = pages.read_columns(conn, table, names, nullness)
    if got is not None and pages.rowids_agree(conn, table, got.rowid):
        return got
    return sql_columns(conn, table, names, nullness)


def sql_columns(conn: sqlite3.Connection, table: str, names: list[str], nullness: tuple[str, ...] = ()) -> Columns:
    """What :func:`pages.read_columns` gives, through ``sqlite3``."""
    have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
    names = [n for n in names if n in have]
    flagged = (names + [n for n in nullness if n in have and n not in names])[:MAX_MASKED]
    # every NULL flag in one packed column: each column costs a text round trip
    mask = " | ".join(f'(("{n}" IS NULL) << {i})' for i, n in enumerate(flagged)) or "0"
    got = dense(conn, table, [mask] + [f'ifnull("{n}", 0)' for n in names])
    out = Columns(rowid=_rowids(conn, table, len(got[0])), values=dict(zip(names, got[1:])), null={})
    for i, name in enumerate(flagged):
        out.null[name] = (got[0] >> i) & 1 == 1
    return out


def _rowids(conn: sqlite3.Connection, table: str, n: int) -> np.ndarray:
    """The rowids of a table of ``n`` rows: lo..hi when that many fit (nsys numbers rows without
    holes, and a column costs a scan), else read."""
    lo, hi = pages.rowid_range(conn, table)
    if lo is None or hi is None:
        return np.zeros(0, np.int64)
    if hi - lo + 1 == n:
        return np.arange(lo, hi + 1, dtype=np.int64)
    return dense(conn, table, ["rowid"])[0]


def dense(conn: sqlite3.Connection, table: str, exprs: list[str], where: str = "") -> list[np.ndarray]:
    """Columns of ``table`` (SQL expressions that never yield NULL) as int64 arrays, in rowid order.

    Large tables are read by up to ``PARALLEL_READERS`` threads, each with its own read-only
    connection and a share of the expressions (SQLite runs without the GIL).
    """
    lo, hi = pages.rowid_range(conn, table)
    if lo is None or hi is None:
        return [np.zeros(0, dtype=np.int64) for _ in exprs]
    workers = min(len(exprs), PARALLEL_READERS)
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if workers < 2 or hi - lo < PARALLEL_MIN_ROWS or not path:
        out = _dense_part(conn, table, exprs, where, lo, hi)
    else:
        shares = [exprs[i::workers] for i in range(workers)]

        def run(share: list[str]) -> list[np.ndarray]:
            own = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return _dense_part(own, table, share, where, lo, hi)
            finally:
                own.close()

        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(run, shares))
        out = [np.zeros(0, np.int64)] * len(exprs)
        for i, cols in enumerate(results):
            out[i::workers] = cols
    if len({len(c) for c in out}) > 1:
        raise UserError(f"{_file(conn)}{table}: columns of unequal length; is the export corrupt?")
    return out


def _dense_part(conn: sqlite3.Connection, table: str, exprs: list[str], where: str, lo: int,
                hi: int) -> list[np.ndarray]:
    select = ", ".join(f"group_concat({e})" for e in exprs)
    cond = f"({where}) AND " if where else ""
    parts: list[list[np.ndarray]] = [[] for _ in exprs]
    for a in range(lo, hi + 1, CHUNK_ROWS):
        sql = f"SELECT {select} FROM {table} WHERE {cond}rowid >= ? AND rowid < ?"
        try:
            row = conn.execute(sql, (a, a + CHUNK_ROWS)).fetchone()
        except sqlite3.OperationalError as exc:   # a blob in the column: not UTF-8 text
            if "decode" not in str(exc):
                raise
            raise UserError(f"{_file(conn)}{table} holds a blob where nsys writes integers; "
                            "is the export corrupt?") from None
        for i, text in enumerate(row):
            parts[i].append(_integers(conn, table, text))
    return [np.concatenate(p) for p in parts]


def _integers(conn: sqlite3.Connection, table: str, text: str | bytes | None) -> np.ndarray:
    """One ``group_concat`` string as int64; a float, text or blob in it is damage, said in one line."""
    if not text:
        return np.zeros(0, np.int64)
    try:
        if isinstance(text, bytes):
            text = text.decode("ascii")
        return np.fromstring(text, dtype=np.int64, sep=",")
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"{_file(conn)}{table} holds a text or a fraction where nsys writes integers; "
                        "is the export corrupt?") from None


def _file(conn: sqlite3.Connection) -> str:
    """``"<path>: "`` of the connection's main database, for an error line."""
    try:
        path = conn.execute("PRAGMA database_list").fetchone()[2]
    except sqlite3.Error:
        return ""
    return f"{path}: " if path else ""
