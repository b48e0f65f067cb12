"""A damaged run store: recognise it, move it aside, build a new one from the run folders.

The store is an index: every run also lives in its folder (``spec.json`` written at start,
``summary.json`` at the end, the event logs). When SQLite reports the file as damaged ("database
disk image is malformed", "file is not a database"), :func:`recover` moves the file (and its
``-wal``/``-shm``) aside as ``gpuscope.sqlite.damaged-<time>`` and puts a new store in its place:
built beside it first, from every table SQLite can still read from the damaged file and then the
runs from their folders (:mod:`gpuscope.store.rebuild`). One process does it at a time (a lock file); the others
notice the new file and reopen it.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import time
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from gpuscope.store.schema import inode

HEADER = b"SQLite format 3\x00"
# sqlite3 error codes (Python >= 3.11 exposes them) for a damaged file, and the messages for older ones
_DAMAGE_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)
_DAMAGE_TEXT = ("malformed", "not a database", "file is encrypted", "database corrupt")
SIDE_FILES = ("-wal", "-shm")
LOG_NAME = "store-recovery.log"


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` did."""

    problem: str
    moved_to: Path
    runs: int            # runs in the new store
    salvaged: list[str]  # tables copied from the damaged file

    def note(self, store: Path) -> str:
        return (f"gpuscope: the run store {store} was damaged ({self.problem}); moved it to {self.moved_to} "
                f"and rebuilt it from the run folders ({self.runs} run(s))")


def is_damage(exc: BaseException) -> bool:
    """Whether an sqlite3 error means a damaged file (not a busy or locked one)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in _DAMAGE_CODES:
        return True
    text = str(exc).lower()
    return any(t in text for t in _DAMAGE_TEXT)


def check(path: Path) -> str | None:
    """None if the store at ``path`` reads as a healthy SQLite file (or is absent), else the problem."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(HEADER))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if head and head != HEADER:
        return "not an SQLite database"
    try:
        with closing(sqlite3.connect(str(path), timeout=30.0)) as conn:
            rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            return str(exc)
        raise
    return None if rows == ["ok"] else "; ".join(rows[:2])


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def recover(path: Path, *, seen_inode: int | None, problem: str) -> Recovery | None:
    """Move a damaged store aside and rebuild it; None when there was nothing to do.

    ``seen_inode`` is the file the caller found damaged: when the store at ``path`` is already
    another file (another process recovered it), or it checks healthy, nothing is moved.
    """
    from gpuscope.store import rebuild

    with _locked(path):
        now = inode(path)
        if now is None or (seen_inode is not None and now != seen_inode):
            return None
        found = check(path)
        if found is None:
            return None
        fresh = path.with_name(path.name + ".rebuilding")
        _remove(fresh)  # left by a recovery that was killed half-way
        runs, salvaged = rebuild.rebuild(fresh, path)
        moved = replace(path, fresh)
        result = Recovery(found or problem, moved, runs, salvaged)
    _tell(path, result)
    return result


def replace(path: Path, fresh: Path) -> Path:
    """Put ``fresh`` in the damaged store's place; returns where the damaged file (and side files) went.

    The store's name never points at nothing: the damaged file is linked to its new name, its side
    files are moved, and only then is the fresh file renamed over it (atomically). A process opening
    the store meanwhile sees the damaged file (and waits on the lock) or the whole new one, never an
    empty store it would create itself.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    try:
        os.link(path, target)
    except OSError:  # a filesystem without hard links: a brief moment without a store file
        os.rename(path, target)
    for side in SIDE_FILES:
        try:
            os.rename(str(path) + side, str(target) + side)
        except FileNotFoundError:
            pass
    os.replace(fresh, path)
    return target


def _remove(path: Path) -> None:
    for name in (str(path), *(str(path) + side for side in SIDE_FILES)):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def _tell(path: Path, result: Recovery) -> None:
    """The one-line note: on stderr and appended to the store's recovery log."""
    line = result.note(path)
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        fd = os.open(path.with_name(LOG_NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as fh:
            fh.write(time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")
    except OSError:
        pass
