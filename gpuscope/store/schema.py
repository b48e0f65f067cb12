"""The store's schema: a plain SQLite connection with every table family's tables created.

Each table family lives in its own module with a ``DDL`` string (and ``ADDED_COLUMNS`` for columns
added after its first release); :func:`raw_connect` applies them once per file. Used by
:mod:`gpuscope.store.db` and by the rebuild of a damaged store.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import threading
import time
from pathlib import Path

BUSY_TIMEOUT_S = 60.0

# Modules that own tables. Order matters only for foreign keys (runs first).
SCHEMA_MODULES = (
    "gpuscope.store.runs",
    "gpuscope.store.samples",
    "gpuscope.store.cleanup_log",
)

_applied: set[tuple[str, int | None]] = set()
_applying = threading.Lock()   # one thread applies the tables; another opening the store meanwhile waits


def raw_connect(db_path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection to the store at ``db_path``, its tables created (0600 file)."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    if not db_path.exists():
        os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT, 0o600))
    conn = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        conn.row_factory = sqlite3.Row
        _use_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        key = (str(db_path.resolve()), inode(db_path))
        if key not in _applied:
            with _applying:
                if key not in _applied:
                    _apply(conn)
                    _applied.add(key)
    except BaseException:
        conn.close()
        raise
    return conn


def _apply(conn: sqlite3.Connection) -> None:
    """Every table family's tables and added columns (idempotent)."""
    for name in SCHEMA_MODULES:
        module = importlib.import_module(name)
        ddl = getattr(module, "DDL", "")
        if ddl:
            conn.executescript(ddl)
        _add_columns(conn, getattr(module, "ADDED_COLUMNS", ()))


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



def inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
