"""The store's schema: a plain SQLite connection with every table family's tables created.

Every table family's DDL (and the columns added after its first release) is in
:mod:`gpuscope.store.tables`; :func:`raw_connect` applies them once per file. Used by
:mod:`gpuscope.store.db` and by the rebuild of a damaged store.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import zlib

from gpuscope.store import tables

BUSY_TIMEOUT_S = 60.0

_version: int | None = None

_applied: set[tuple[str, int | None]] = set()
_applying = threading.Lock()   # one thread applies the tables; another opening the store meanwhile waits


def raw_connect(db_path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A plain sqlite3 connection to the store at ``db_path``, its tables created (0600 file)."""
    db_path = os.fspath(db_path)
    os.makedirs(os.path.dirname(db_path) or ".", exist_ok=True)
    if not os.path.exists(db_path):
        os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT, 0o600))
    conn = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        conn.row_factory = sqlite3.Row
        _use_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        key = (os.path.realpath(db_path), inode(db_path))
        if key not in _applied:
            with _applying:
                if key not in _applied:
                    version = schema_version()
                    if conn.execute("PRAGMA user_version").fetchone()[0] != version:
                        _apply(conn)
                        conn.execute(f"PRAGMA user_version = {version}")
                    _applied.add(key)
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version() -> int:
    """This version's tables as a number: a checksum of every family's ``DDL`` and added columns.
    A store keeps it in ``PRAGMA user_version`` once they are applied, so that the next connection
    (every ``gpuscope run`` makes one) reads one number instead of running every ``CREATE ... IF
    NOT EXISTS`` again (docs/STORE.md). A store written by another version of gpuscope has
    another number, and gets this version's tables and columns (idempotent) when opened."""
    global _version
    if _version is None:
        text = "".join(ddl + repr(added) for ddl, added in tables.FAMILIES)
        _version = zlib.crc32(text.encode()) & 0x7FFFFFFF or 1
    return _version


def _apply(conn: sqlite3.Connection) -> None:
    """Every table family's tables and added columns (idempotent)."""
    for ddl, added in tables.FAMILIES:
        conn.executescript(ddl)
        _add_columns(conn, added)


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the store to WAL once (the mode is kept in the file). The switch needs the database to
    itself, and SQLite answers "database is locked" at once, without its busy wait, when several
    processes open a new store together (eight samplers starting at the same moment): wait here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _add_columns(conn: sqlite3.Connection, added: tuple[tuple[str, str, str], ...]) -> None:
    """Columns added after a table was first released: ALTER an older store in place."""
    for table, column, decl in added:
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")



def inode(path: str | os.PathLike[str]) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
