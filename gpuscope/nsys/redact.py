"""A shareable copy of an nsys SQLite export, without the program's environment and arguments.

nsys keeps the whole environment of the profiled program (tokens and keys included) in two
tables of its export: ``TARGET_INFO_SYSTEM_ENV`` (row ``DeviceEnvironment``: ``NAME=value;...``)
and ``META_DATA_CAPTURE`` (rows ``PROCESS_n:ENVIRONMENT_VARIABLE``, one per variable); copies of
it also reach the string table ``StringIds`` (NUL-separated ``NAME=value`` blocks). The program's
command-line arguments are rows ``PROCESS_n:ARGUMENT_n`` of ``META_DATA_CAPTURE``. The copy drops
those rows, replaces every ``StringIds`` string that holds one of the environment's ``NAME=value``
pairs, or is an environment block of any process (NUL-separated ``NAME=value`` parts), by
``[environment redacted]``, replaces the value of every variable whose name looks secret
(``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ...) wherever it appears in a text column (an NVTX message,
a thread name), and writes the result with ``VACUUM INTO`` a new file: deleted rows leave no
bytes behind in free pages. A ``.nsys-rep`` is a binary format only nsys writes: it cannot be
redacted in place; share the redacted ``.sqlite`` instead (gpuscope and ``nsys stats`` read it).
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

from gpuscope.errors import UserError

# (table, WHERE clause of the rows that hold the environment)
ENV_ROWS = (
    ("TARGET_INFO_SYSTEM_ENV", "name = 'DeviceEnvironment'"),
    ("META_DATA_CAPTURE", "name LIKE '%:ENVIRONMENT_VARIABLE' OR name = 'ENVIRONMENT_VARIABLE'"),
)
# the program's command line after its executable: arguments carry tokens as often as the environment
ARGUMENT_ROWS = ("META_DATA_CAPTURE", "name LIKE 'PROCESS%:ARGUMENT%'")
# variables whose values are replaced in every text column, not only in the environment's own rows
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.I)
SECRET_MIN_LEN = 6


def redact_export(src: Path, out: Path) -> int:
    """Write ``out``: ``src`` (an nsys .sqlite export) without the environment and the program's
    arguments; returns rows removed or rewritten. No byte of a removed value is left in ``out``."""
    if out.exists() and out.resolve() == src.resolve():
        raise UserError("--redact needs a new file name: the original is kept as it is")
    work = out.with_name(f".{out.name}.redacting")
    try:
        with closing(sqlite3.connect(f"file:{src}?mode=ro", uri=True)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "TARGET_INFO_SYSTEM_ENV" not in tables and "META_DATA_CAPTURE" not in tables:
                raise UserError(f"{src}: not an nsys export (no TARGET_INFO_SYSTEM_ENV or META_DATA_CAPTURE)")
            work.unlink(missing_ok=True)
            with closing(sqlite3.connect(str(work))) as dst:
                conn.backup(dst)
        work.chmod(0o600)
        removed = _strip(work, tables)
        out.unlink(missing_ok=True)
        _vacuum_into(work, out)
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{src}: cannot read it as an nsys export: {exc}") from None
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror}") from None
    finally:
        work.unlink(missing_ok=True)
    return removed


def _vacuum_into(work: Path, out: Path) -> None:
    """``out``: a fresh copy of ``work``'s live rows only (the work copy's free pages and its
    rollback journal may still hold the deleted text; the work copy is then removed)."""
    os.close(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))   # empty and private: VACUUM INTO takes it
    with closing(sqlite3.connect(str(work), isolation_level=None)) as conn:
        conn.execute("VACUUM INTO ?", (str(out),))
    out.chmod(0o600)


REDACTED = "[environment redacted]"


def _pairs(conn: sqlite3.Connection, tables: set[str]) -> set[str]:
    """The environment's ``NAME=value`` pairs, as nsys recorded them."""
    pairs: set[str] = set()
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        for (value,) in conn.execute(f"SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE {ENV_ROWS[0][1]}"):
            pairs.update(p for p in str(value or "").split(";") if "=" in p)
    if "META_DATA_CAPTURE" in tables:
        for (value,) in conn.execute(f"SELECT value FROM META_DATA_CAPTURE WHERE {ENV_ROWS[1][1]}"):
            name, _, val = str(value or "").partition("=")
            pairs.add(f"{name}={val[1:-1] if val.startswith(chr(34)) and val.endswith(chr(34)) else val}")
    return {p for p in pairs if len(p) > 3}


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _env_block(text: str, pairs: set[str]) -> list[str] | None:
    """The ``NAME=value`` parts of a string that holds an environment, or None.

    A string holds one when a part is a pair nsys recorded as the environment, or when it is a
    NUL-separated block of two or more ``NAME=value`` parts (the environment of any process nsys
    saw, the profiled program's own included, whatever the environment tables say)."""
    if "=" not in text:
        return None
    parts = re.split(r"[\0\n;]", text)
    if any(part in pairs for part in parts):
        return [part for part in parts if "=" in part]
    named = [part for part in text.split("\0") if _ENV_NAME.match(part)]
    return named if len(named) >= 2 else None


def _strip_strings(conn: sqlite3.Connection, pairs: set[str]) -> int:
    """Replace the strings that carry environment pairs (adding their pairs to ``pairs``); returns how many."""
    hits = []
    for sid, value in conn.execute("SELECT id, value FROM StringIds"):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")
        found = _env_block(text, pairs)
        if found is not None:
            hits.append(sid)
            pairs.update(found)
    conn.executemany("UPDATE StringIds SET value=? WHERE id=?", [(REDACTED, sid) for sid in hits])
    return len(hits)


def _secrets(pairs: set[str]) -> list[str]:
    """Values of the variables whose names look secret, longest first (a value inside another)."""
    found = {value for name, _, value in (p.partition("=") for p in pairs)
             if SECRET_NAME.search(name) and len(value) >= SECRET_MIN_LEN}
    return sorted(found, key=len, reverse=True)


def _text_columns(conn: sqlite3.Connection, tables: set[str]) -> list[tuple[str, str]]:
    out = []
    for table in sorted(tables):
        for row in conn.execute(f'PRAGMA table_info("{table}")'):
            if "CHAR" in str(row[2]).upper() or "TEXT" in str(row[2]).upper() or not row[2]:
                out.append((table, str(row[1])))
    return out


def _scrub_secrets(conn: sqlite3.Connection, tables: set[str], secrets: list[str]) -> int:
    """Replace each secret value in every text column of the export; returns cells rewritten.

    Matched and replaced as bytes in Python: SQLite's ``instr`` and ``replace`` stop at the first
    NUL of a text, and nsys keeps whole environments as NUL-separated texts."""
    changed = 0
    for table, col in _text_columns(conn, tables):
        for secret in secrets:
            rows = conn.execute(f'SELECT rowid, "{col}" FROM "{table}" WHERE instr(CAST("{col}" AS BLOB), ?) > 0',
                                (secret.encode(),)).fetchall()
            for rowid, value in rows:
                text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?',
                             (text.replace(secret, REDACTED), rowid))
            changed += len(rows)
    return changed


def _strip(work: Path, tables: set[str]) -> int:
    removed = 0
    with closing(sqlite3.connect(str(work), isolation_level=None)) as conn:
        conn.execute("BEGIN")
        pairs = _pairs(conn, tables)
        if "StringIds" in tables:
            removed += _strip_strings(conn, pairs)
        for table, where in (*ENV_ROWS, ARGUMENT_ROWS):
            if table in tables:
                removed += conn.execute(f"DELETE FROM {table} WHERE {where}").rowcount
        removed += _scrub_secrets(conn, tables, _secrets(pairs))
        conn.execute("COMMIT")
    return removed


def export_for(target: Path) -> Path:
    """The .sqlite export to redact for a report path or run folder (a .nsys-rep's sibling export)."""
    if target.is_dir():
        target = target / "report.sqlite"
    if target.suffix == ".nsys-rep":
        sibling = target.with_suffix(".sqlite")
        if sibling.exists():
            return sibling
        raise UserError(f"{target}: a .nsys-rep cannot be redacted (nsys's binary format); export it first "
                        f"(nsys export --type sqlite {target}, or `gpuscope report {target}`) and redact the .sqlite")
    if not target.exists():
        raise UserError(f"{target}: no such file (a run recorded under nsys has report.sqlite in its folder)")
    return target
