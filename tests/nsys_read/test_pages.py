"""The two read paths of an export's columns (gpuscope.nsys.columns): the page decoder
(gpuscope.nsys.pages) and ``sqlite3``, each against SQLite's own answer, and the Timeline they feed.

Every test builds a real SQLite file and compares what each path reads with what a plain
``SELECT`` returns for the same rows; files the page decoder must refuse return None (the reader
then goes through ``sqlite3``, the reference path).
"""

from __future__ import annotations

import random
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuscope.nsys import columns, pages, reader

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_units import G, make_export

COLS = ["a", "b", "c", "d"]


@pytest.fixture(autouse=True)
def _compiled_built(monkeypatch):
    monkeypatch.delenv("GPUSCOPE_NO_COMPILED", raising=False)
    monkeypatch.delenv("GPUSCOPE_NO_PAGE_READER", raising=False)
    assert pages.compiled(), "the compiled page decoder is not built: pip install -e . builds it (needs a C compiler)"


@pytest.fixture(params=["pages", "sqlite3"])
def path(request):
    """The read path under test: the page decoder, or sqlite3 (the fallback)."""
    return request.param


def _read(conn: sqlite3.Connection, path: str, names, nullness=("t",)):
    if path == "pages":
        return pages.read_columns(conn, "T", names, nullness)
    return columns.sql_columns(conn, "T", names, nullness)


def _table(path: Path, rows: list[tuple], *, page_size: int = 4096, schema: str = "a INTEGER, t TEXT, b INTEGER, "
           "c INTEGER, d INTEGER", extra_sql: str = "") -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute(f"CREATE TABLE T ({schema})")
    conn.executemany("INSERT INTO T (a, t, b, c, d) VALUES (?, ?, ?, ?, ?)", rows)
    if extra_sql:
        conn.executescript(extra_sql)
    conn.commit()
    conn.close()
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _check(conn: sqlite3.Connection, path: str, names=COLS) -> pages.Columns:
    got = _read(conn, path, names)
    assert got is not None
    ref = conn.execute(f"SELECT rowid, t IS NULL, {', '.join(names)} FROM T ORDER BY rowid").fetchall()
    assert got.rowid.tolist() == [r[0] for r in ref]
    assert got.null["t"].tolist() == [bool(r[1]) for r in ref]
    for i, name in enumerate(names):
        want = [r[2 + i] for r in ref]
        assert got.null[name].tolist() == [v is None for v in want], name
        assert got.values[name].tolist() == [0 if v is None else v for v in want], name
    return got


def _value(rng: random.Random):
    """Integers of every SQLite width (1, 2, 3, 4, 6, 8 bytes; 0 and 1 have their own serial types)."""
    bits = rng.choice([0, 1, 7, 8, 15, 16, 23, 24, 31, 32, 47, 48, 62, 63])
    v = rng.randrange(-(1 << bits), 1 << bits) if bits else rng.choice([0, 1])
    return rng.choice([v, v, v, None, 0, 1, -1, (1 << 63) - 1, -(1 << 63)])


def test_every_integer_width_null_and_multi_level_btree(tmp_path, path):
    rng = random.Random(7)
    rows = [(_value(rng), rng.choice([None, "x", "y" * 40]), _value(rng), _value(rng), _value(rng))
            for _ in range(30_000)]
    conn = _table(tmp_path / "t.sqlite", rows, page_size=1024)   # small pages: three b-tree levels
    got = _check(conn, path)
    assert len(got.rowid) == 30_000


@pytest.mark.parametrize("page_size", [512, 65536])
def test_page_sizes_holes_and_long_texts(tmp_path, page_size, path):
    """Deleted rows (rowid holes), texts whose serial type takes two header bytes (58+ characters)
    before the wanted columns (decoded one by one), and the smallest and largest page sizes."""
    rng = random.Random(page_size)
    rows = [(rng.randrange(1 << 40), "z" * rng.choice([0, 57, 58, 200]), i, -i, None) for i in range(5000)]
    conn = _table(tmp_path / "t.sqlite", rows, page_size=page_size,
                  extra_sql="DELETE FROM T WHERE b % 7 = 3;")
    got = _check(conn, path)
    assert len(got.rowid) == 5000 - len([i for i in range(5000) if i % 7 == 3])


def test_columns_added_later_read_as_null(tmp_path, path):
    """Records written before ALTER TABLE ADD COLUMN are shorter than the table: NULL there."""
    p = tmp_path / "t.sqlite"
    conn = _table(p, [(1, None, 2, 3, 4), (5, "s", 6, 7, 8)], schema="a INTEGER, t TEXT, b INTEGER, c INTEGER, "
                  "d INTEGER")
    conn.close()
    w = sqlite3.connect(p)
    w.execute("ALTER TABLE T ADD COLUMN e INTEGER")
    w.execute("INSERT INTO T (a, t, b, c, d, e) VALUES (9, NULL, 10, 11, 12, 13)")
    w.commit()
    w.close()
    conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    _check(conn, path, COLS + ["e"])


@pytest.mark.parametrize("case", ["wal", "without-rowid", "rowid-alias", "overflow", "float", "text", "off"])
def test_refuses_what_it_cannot_read(tmp_path, case, monkeypatch):
    """Each of these returns None, so the caller reads through sqlite3."""
    p = tmp_path / "t.sqlite"
    schema = "a INTEGER, t TEXT, b INTEGER, c INTEGER, d INTEGER"
    rows = [(i, None, i, i, i) for i in range(100)]
    if case == "without-rowid":
        schema = "a INTEGER PRIMARY KEY, t TEXT, b INTEGER, c INTEGER, d INTEGER) WITHOUT ROWID; --"
    if case == "rowid-alias":
        schema = "a INTEGER PRIMARY KEY, t TEXT, b INTEGER, c INTEGER, d INTEGER"
    if case == "overflow":
        rows[50] = (50, "o" * 10_000, 50, 50, 50)
    if case == "float":
        rows[50] = (50, None, 0.5, 50, 50)
    if case == "text":
        rows[50] = (50, None, 50, "fifty", 50)
    conn = _table(p, rows, schema=schema)
    if case == "wal":
        conn.close()
        w = sqlite3.connect(p)
        w.execute("PRAGMA journal_mode=WAL")
        w.close()
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    if case == "off":
        monkeypatch.setenv("GPUSCOPE_NO_PAGE_READER", "1")
    assert pages.read_columns(conn, "T", COLS, ("t",)) is None


@pytest.mark.parametrize("bad", ["0.5", "'fifty'", "x'00ff'"])
def test_sqlite3_path_turns_a_non_integer_into_one_line(tmp_path, bad):
    """Where the page decoder refuses a float, text or blob in an integer column, the sqlite3 path
    says in one line which file and table hold it (no ValueError from numpy's parser)."""
    from gpuscope.errors import UserError

    p = tmp_path / "t.sqlite"
    conn = _table(p, [(i, None, i, i, i) for i in range(100)])
    conn.close()
    w = sqlite3.connect(p)
    w.execute(f"UPDATE T SET c = {bad} WHERE a = 50")
    w.commit()
    w.close()
    conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    assert pages.read_columns(conn, "T", COLS) is None
    with pytest.raises(UserError, match=r"t\.sqlite: T holds a (text or a fraction|blob) where"):
        columns.read(conn, "T", COLS)


def _timelines(path: Path, monkeypatch):
    """(Timeline through the page reader, Timeline through sqlite3) of one export."""
    conn = reader.open_export(path)
    a = reader.read_timeline(conn)
    monkeypatch.setenv("GPUSCOPE_NO_PAGE_READER", "1")
    b = reader.read_timeline(conn)
    monkeypatch.delenv("GPUSCOPE_NO_PAGE_READER")
    conn.close()
    return a, b


@pytest.mark.parametrize("variant", ["2022", "2024", "holes", "text-only", "big-domain"])
def test_timeline_from_pages_equals_sqlite_path(tmp_path, monkeypatch, variant):
    p = make_export(tmp_path / "x.sqlite", layout="2022" if variant == "2022" else "2024", kernels=True)
    conn = sqlite3.connect(p)
    if variant == "holes":
        conn.execute("DELETE FROM NVTX_EVENTS WHERE start = 200")
    if variant == "text-only":
        conn.execute("UPDATE NVTX_EVENTS SET text = 'txt' || start, textId = NULL WHERE eventType = 59")
    if variant == "big-domain":   # clipped to 65535 on both paths; negative category, 8-byte color
        conn.execute("UPDATE NVTX_EVENTS SET domainId = 70000, category = -5, color = 4294967295 "
                     "WHERE eventType = 59 AND start = 400")
    conn.commit()
    conn.close()
    a, b = _timelines(p, monkeypatch)
    assert len(a.ranges) == len(b.ranges) > 0
    for name in ("ranges", "marks", "domains", "processes", "threads"):
        x, y = getattr(a, name), getattr(b, name)
        for f in x.__dataclass_fields__:
            if f == "name_id":   # string ids depend on the order strings were met: compare the strings
                assert [a.strings.get(int(i)) for i in x.name_id] == [b.strings.get(int(i)) for i in y.name_id]
            else:
                assert np.array_equal(np.asarray(getattr(x, f)), np.asarray(getattr(y, f))), (name, f)
    assert a.nvtx_last_ns == b.nvtx_last_ns and np.array_equal(a.nvtx_pids, b.nvtx_pids)


def test_page_reader_is_used_on_an_export(tmp_path, monkeypatch):
    """The Timeline reader takes the page path on a plain export (not silently the fallback)."""
    p = make_export(tmp_path / "x.sqlite", layout="2024")
    calls = []
    real = pages.read_columns
    monkeypatch.setattr(pages, "read_columns", lambda *a, **k: calls.append(r := real(*a, **k)) or r)
    conn = reader.open_export(p)
    reader.read_timeline(conn)
    conn.close()
    assert len(calls) == 1 and calls[0] is not None and len(calls[0].rowid) == 8
    assert G(10, 10) in calls[0].values["globalTid"].tolist()


def test_damaged_files_give_none_or_columns_never_a_crash(tmp_path):
    """Random bytes changed in the b-tree pages (cell pointers, varints, child page numbers, page
    types) and a file cut short: each read returns None or whole columns; it never crashes the
    process or reads outside the file (the compiled decoder checks every offset)."""
    rng = random.Random(11)
    rows = [(_value(rng), rng.choice([None, "x" * rng.randrange(80)]), i, _value(rng), None) for i in range(4000)]
    good = tmp_path / "good.sqlite"
    _table(good, rows, page_size=1024).close()
    data = good.read_bytes()
    outcomes = {"none": 0, "columns": 0}
    for trial in range(300):
        bad = bytearray(data)
        if trial % 50 == 49:
            bad = bad[:rng.randrange(1024, len(bad))]
        for _ in range(rng.choice([1, 4, 32])):
            pos = rng.randrange(1024, len(bad))   # page 1 (sqlite_master) left whole: the table stays found
            bad[pos] = rng.randrange(256)
        p = tmp_path / f"bad{trial % 4}.sqlite"
        p.write_bytes(bytes(bad))
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            got = pages.read_columns(conn, "T", COLS, ("t",))
        except sqlite3.DatabaseError:
            got = None   # SQLite itself refused the schema query
        conn.close()
        if got is None:
            outcomes["none"] += 1
            continue
        outcomes["columns"] += 1
        n = len(got.rowid)
        assert all(len(v) == n for v in got.values.values()) and all(len(v) == n for v in got.null.values())
    assert outcomes["none"] and outcomes["columns"], outcomes
