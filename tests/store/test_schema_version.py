"""The store keeps its schema's version (PRAGMA user_version): a connection to a store that has this
version's tables reads that number instead of running every CREATE again (issue 14.4); a store of
another version gets this version's tables and columns."""

from __future__ import annotations

import sqlite3

from gpuscope.store import schema


def _tables(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _reconnect(path) -> None:
    """A connection as a new process makes it (the process's own note of applied stores cleared)."""
    schema._applied.clear()
    schema.raw_connect(path).close()


def test_a_new_store_gets_the_tables_and_the_version(tmp_path):
    path = tmp_path / "s.sqlite"
    _reconnect(path)
    assert {"runs", "sample_series", "cleanup_actions"} <= _tables(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.schema_version() > 0


def test_a_store_of_this_version_is_not_changed_and_one_of_another_version_is(tmp_path):
    path = tmp_path / "s.sqlite"
    _reconnect(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE cleanup_actions")
    _reconnect(path)                  # same version: its tables are taken as they are
    assert "cleanup_actions" not in _tables(path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")    # as another version of gpuscope left it
    _reconnect(path)
    assert "cleanup_actions" in _tables(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.schema_version()


def test_the_version_follows_the_tables(monkeypatch):
    """A changed DDL is another version (so a store of the old tables gets the new ones)."""
    before = schema.schema_version()
    from gpuscope.store import tables

    changed = (*tables.FAMILIES[:-1], (tables.CLEANUP_ACTIONS + "\nCREATE TABLE IF NOT EXISTS extra (x);", ()))
    monkeypatch.setattr(tables, "FAMILIES", changed)
    monkeypatch.setattr(schema, "_version", None)
    assert schema.schema_version() != before
