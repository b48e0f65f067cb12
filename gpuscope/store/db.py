"""The run store: one SQLite file (WAL) indexing runs, their processes, samples and actions.

Each table family lives in its own module with a ``DDL`` string; :func:`connect` applies all of
them (idempotent ``CREATE ... IF NOT EXISTS``). Writers keep transactions short so that the app,
the CLI and a running sampler can share the file; a crash loses at most the open transaction.

:func:`connect` returns a :class:`StoreConnection`: an ``sqlite3.Connection`` look-alike that
survives a damaged file. When SQLite reports damage, the file is moved aside and the store is
rebuilt from the run folders (:mod:`gpuscope.store.recovery`), then the statement is run again on
the new store; when another process has rebuilt it, the connection follows the new file.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Union

from gpuscope import paths
from gpuscope.store import schema
from gpuscope.store.schema import inode

if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Literal, Sequence

    from gpuscope.store import recovery

BUSY_TIMEOUT_S = schema.BUSY_TIMEOUT_S
raw_connect = schema.raw_connect


def connect(path: str | os.PathLike[str] | None = None) -> StoreConnection:
    """Open the store (creating it and its tables if needed; recovering it if it is damaged)."""
    return StoreConnection(os.fspath(path) if path is not None else paths.store_file())


# Connections :func:`release` keeps open for the process's os._exit (see hold_until_exit).
_held: list[Any] | None = None


def hold_until_exit() -> None:
    """This process ends by ``os._exit`` once its command is done (``gpuscope run``: cli.py): from
    now on :func:`release` keeps connections open instead of closing them.

    Closing a store's last connection checkpoints its WAL into the file and syncs both to disk,
    at the end of every ``gpuscope run``, after the program (docs/STORE.md has the figure). Left
    open at ``os._exit``, the transactions committed stay in the WAL, where every later connection
    reads them (SQLite's own crash recovery; the WAL's frames carry checksums), and the
    next checkpoint (any writer's, once the WAL holds 1000 pages, or the next last close) moves
    them into the file. A crash of gpuscope loses nothing committed either way; what waits is
    only the sync to disk, as for the run folder's own files, from which the store can be rebuilt
    (store/rebuild.py). A process that ends otherwise (a non-daemon thread kept it from
    ``os._exit``) closes them at its teardown as usual."""
    global _held
    if _held is None:
        _held = []


def release(conn: Any) -> None:
    """Close ``conn`` (None: nothing), or keep it open for the process's ``os._exit``."""
    if conn is None:
        return
    if _held is not None:
        _held.append(conn)
    else:
        conn.close()


class Rows:
    """The rows of one statement, read at once (so damage shows up where it can be recovered)."""

    def __init__(self, cursor: sqlite3.Cursor, rows: list[Any]) -> None:
        self._rows = rows
        self._i = 0
        self.lastrowid = cursor.lastrowid
        self.rowcount = cursor.rowcount
        self.description = cursor.description

    def fetchone(self) -> Any:
        if self._i >= len(self._rows):
            return None
        self._i += 1
        return self._rows[self._i - 1]

    def fetchall(self) -> list[Any]:
        rest, self._i = self._rows[self._i:], len(self._rows)
        return rest

    def fetchmany(self, size: int = 1) -> list[Any]:
        part = self._rows[self._i:self._i + size]
        self._i += len(part)
        return part

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class StoreConnection:
    """A store connection that recovers from a damaged file (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path         # a string: the run path does without pathlib (paths.as_path)
        self.recovered: list[recovery.Recovery] = []
        self._conn, self._inode = self._open()

    def _open(self) -> tuple[sqlite3.Connection, int | None]:
        for attempt in (1, 2):
            seen = inode(self.path)
            try:
                return raw_connect(self.path), inode(self.path)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or not _is_damage(exc):
                    raise
                self._recover(seen, exc)
        raise AssertionError("unreachable")

    def _recover(self, seen: int | None, exc: BaseException) -> None:
        from gpuscope.store import recovery

        done = recovery.recover(paths.as_path(self.path), seen_inode=seen, problem=str(exc))
        if done is not None:
            self.recovered.append(done)

    def _switch(self, exc: BaseException | None) -> None:
        """Reopen on the new file (after recovering the old one, when ``exc`` says it is damaged)."""
        try:
            self._conn.close()
        except sqlite3.Error:
            pass
        if exc is not None:
            self._recover(self._inode, exc)
        self._conn, self._inode = self._open()

    def _follow(self) -> None:
        """Another process replaced the store file (recovered it): use the new one."""
        if not self._conn.in_transaction and inode(self.path) not in (self._inode, None):
            self._switch(None)

    def _run(self, call: Callable[[sqlite3.Connection], sqlite3.Cursor]) -> Rows:
        self._follow()
        try:
            cur = call(self._conn)
            return Rows(cur, cur.fetchall())
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                raise
            self._switch(exc)
        cur = call(self._conn)
        return Rows(cur, cur.fetchall())

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Rows:
        return self._run(lambda c: c.execute(sql, params))

    def executemany(self, sql: str, seq: Any) -> Rows:
        rows = list(seq)  # a generator can be run only once: keep it for the retry
        return self._run(lambda c: c.executemany(sql, rows))

    def executescript(self, script: str) -> Rows:
        return self._run(lambda c: c.executescript(script))

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    @property
    def row_factory(self) -> Any:
        return self._conn.row_factory

    @row_factory.setter
    def row_factory(self, value: Any) -> None:
        self._conn.row_factory = value

    def commit(self) -> None:
        self._end(self._conn.commit)

    def rollback(self) -> None:
        self._end(self._conn.rollback)

    def _end(self, finish: Callable[[], None]) -> None:
        try:
            finish()
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                raise
            self._switch(exc)  # the transaction is lost with the damaged file; its run folder keeps the run

    def close(self) -> None:
        self._conn.close()

    def __getattr__(self, name: str) -> Any:
        # the rest of sqlite3.Connection (total_changes, create_function, ...), without recovery
        return getattr(self.__dict__["_conn"], name)

    def __enter__(self) -> StoreConnection:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is None:
            self.commit()
        else:
            try:
                self._conn.rollback()
            except sqlite3.Error:
                pass
        return False


# What the store's functions take: a connection of connect(), or a plain one (schema.raw_connect).
Connection = Union[sqlite3.Connection, StoreConnection]


def _is_damage(exc: BaseException) -> bool:
    """:func:`gpuscope.store.recovery.is_damage`, its module imported only when SQLite raises."""
    from gpuscope.store import recovery

    return recovery.is_damage(exc)
