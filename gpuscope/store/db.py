"""The run store: one SQLite file (WAL) indexing runs, their processes, samples and actions.

Each table family lives in its own module with a ``DDL`` string; :func:`connect` applies all of
them (idempotent ``CREATE ... IF NOT EXISTS``). Writers keep transactions short so that the app,
the CLI and a running sampler can share the file; a crash loses at most the open transaction.
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path

from gpuscope import paths

# Modules that own tables. Order matters only for foreign keys (runs first).
SCHEMA_MODULES = (
    "gpuscope.store.runs",
    "gpuscope.store.samples",
    "gpuscope.store.cleanup_log",
)

_applied: set[str] = set()


def connect(path: str | Path | None = None) -> sqlite3.Connection:
    """Open the store (creating it and its tables if needed)."""
    db_path = Path(path) if path is not None else paths.store_path()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(db_path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    key = str(db_path.resolve())
    if key not in _applied:
        for name in SCHEMA_MODULES:
            module = importlib.import_module(name)
            ddl = getattr(module, "DDL", "")
            if ddl:
                conn.executescript(ddl)
            _add_columns(conn, getattr(module, "ADDED_COLUMNS", ()))
        _applied.add(key)
    return conn


def _add_columns(conn: sqlite3.Connection, added: tuple[tuple[str, str, str], ...]) -> None:
    """Columns added after a table was first released: ALTER an older store in place."""
    for table, column, decl in added:
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
