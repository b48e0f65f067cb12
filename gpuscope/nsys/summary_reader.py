"""Read only what the summaries need from an nsys export: no Timeline of the NVTX ranges.

``gpuscope report --json`` and the app's first paint need the ``nsys stats`` summaries, the process
table and the findings, not the ranges' threads, colours and nesting. The NVTX table is read as two
packed int64 columns in one scan (instead of the Timeline reader's five plus a nesting pass):

- ``key`` = pid | min(eventType, 127) << 24 | (textId + 1) << 31
- ``val`` = min(domainId, 65535) | has_end << 16 | (end - start, or start when end is NULL) << 17

with ``max(start)``, ``max(end)`` (nvtx_sum's "M") from the same scan. Exports whose values do not
fit (timestamps of 2^45 ns and more, as ``--ts-normalize`` writes; string ids of 2^31 and more)
return None and are read through the Timeline reader. The few rows whose name or domain needs the
``text`` column or the thread are fetched afterwards by rowid.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np

from gpuscope.nsys import reader as R
from gpuscope.trace import summary as S
from gpuscope.trace import timeline as T

VALUE_LIMIT = 1 << 45        # |start| and |end - start| must stay below this to pack
ROWID_BATCH = 20_000         # rowids per "WHERE rowid IN (...)" query


@dataclass
class SummaryData:
    """What a report shows before (or without) its Timeline."""

    summaries: dict[str, list]
    processes: list[dict]
    notes: list[str]


def read_summary_data(conn: sqlite3.Connection, info: R.ExportInfo) -> SummaryData | None:
    """Summaries and process table of an export, or None when its values need the full reader."""
    tl = T.Timeline()
    strings = R._Strings(conn, info.tables, tl.strings)
    nvtx = _read_nvtx(conn, info, strings, tl)
    if nvtx is None:
        return None
    tl.osrt = R.read_calls(conn, info, "OSRT_API", strings)
    tl.cuda_api = R.read_calls(conn, info, "CUPTI_ACTIVITY_KIND_RUNTIME", strings)
    tl.kernels = R.read_kernels(conn, info, strings)
    tl.memops = R.read_memops(conn, info, strings)
    R.read_processes(conn, info, strings, tl)
    R.read_clock(conn, info, tl)
    R.add_schema_notes(info, tl)
    sums = S.all_summaries(tl, naming=info.naming, generation=info.stats_generation)
    r = nvtx["range"]
    sums["nvtx"] = S.nvtx_summary_of(tl.strings, tl.domains, nvtx["pid"][r], nvtx["domain"][r],
                                     nvtx["name"][r], np.isin(nvtx["etype"][r], (60, 71)).astype(np.uint8),
                                     nvtx["dur"][r], info.naming)
    procs = S.process_table(tl, (nvtx["pid"][r], nvtx["pid"][nvtx["etype"] == R.NVTX_MARK]))
    return SummaryData(summaries=sums, processes=procs, notes=list(tl.notes))


def _packed_exprs(cols: list[str]) -> list[str]:
    """The two packed columns (SQLite gives &, | and << one precedence: everything parenthesised)."""
    gtid = R._expr(cols, "globalTid", "0")
    key = (f"((({gtid}) >> 24) & 16777215) | (min(eventType, 127) << 24)"
           f" | (({R._expr(cols, 'textId')} + 1) << 31)")
    span = '"end" - start' if "end" in cols else "NULL"
    val = (f"min({R._expr(cols, 'domainId', '0')}, 65535)"
           f" | ((CASE WHEN ({span}) IS NULL THEN 0 ELSE 1 END) << 16)"
           f" | (coalesce({span}, start) << 17)")
    return [key, val]


def _scan(conn: sqlite3.Connection, cols: list[str], lo: int, hi: int, holes: bool):
    """(key, val[, rowid]) arrays and (min start, max start, max end) of NVTX_EVENTS, in chunks."""
    exprs = _packed_exprs(cols) + (["rowid"] if holes else [])
    select = ", ".join(f"group_concat({e})" for e in exprs)
    end_col = 'max("end")' if "end" in cols else "NULL"
    parts: list[list[np.ndarray]] = [[] for _ in exprs]
    lo_s, hi_s, hi_e = None, None, None
    for a in range(lo, hi + 1, R.CHUNK_ROWS):
        row = conn.execute(f"SELECT {select}, min(start), max(start), {end_col} FROM NVTX_EVENTS "
                           f"WHERE rowid >= ? AND rowid < ?", (a, a + R.CHUNK_ROWS)).fetchone()
        for i, text in enumerate(row[:len(exprs)]):
            parts[i].append(np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64))
        mn, mx, me = row[len(exprs):]
        lo_s = mn if lo_s is None or (mn is not None and mn < lo_s) else lo_s
        hi_s = mx if hi_s is None or (mx is not None and mx > hi_s) else hi_s
        hi_e = me if hi_e is None or (me is not None and me > hi_e) else hi_e
    return [np.concatenate(p) for p in parts], (lo_s, hi_s, hi_e)


def _fits(bounds: tuple, max_sid: int) -> bool:
    lo_s, hi_s, hi_e = bounds
    values = [v for v in (lo_s, hi_s, hi_e) if v is not None]
    return all(abs(int(v)) < VALUE_LIMIT for v in values) and max_sid < (1 << 31) - 1


def _read_nvtx(conn: sqlite3.Connection, info: R.ExportInfo, strings, tl: T.Timeline) -> dict | None:
    """Decoded NVTX columns (pid, etype, name, domain, dur, range mask); fills domains and pids."""
    empty = {k: np.zeros(0, np.int64) for k in ("pid", "etype", "name", "domain", "dur")}
    empty["range"] = np.zeros(0, bool)
    if "NVTX_EVENTS" not in info.tables:
        return empty
    lo, hi, n = conn.execute("SELECT min(rowid), max(rowid), count(*) FROM NVTX_EVENTS").fetchone()
    if not n:
        return empty
    holes = hi - lo + 1 != n
    cols = R.table_columns(conn, "NVTX_EVENTS")
    max_sid = conn.execute("SELECT max(id) FROM StringIds").fetchone()[0] if "StringIds" in info.tables else 0
    got, bounds = _scan(conn, cols, lo, hi, holes)
    if not _fits(bounds, max_sid or 0):
        return None
    key, val = got[0], got[1]
    rowid = got[2] if holes else np.arange(lo, lo + n, dtype=np.int64)
    pid = (key & 0xFFFFFF).astype(np.int32)
    etype = ((key >> 24) & 127).astype(np.int32)
    name = strings.map((key >> 31) - 1)
    domain = (val & 0xFFFF).astype(np.int32)
    has_end = ((val >> 16) & 1).astype(bool)
    span = val >> 17
    last = max(v for v in bounds[1:] if v is not None)
    tl.nvtx_last_ns = int(last)
    dur = np.where(has_end, span, last - span)
    is_range = np.isin(etype, R.NVTX_RANGE_TYPES)
    d = etype == R.NVTX_DOMAIN_CREATE
    if "text" in cols:
        _named_by_text(conn, strings, rowid, name, is_range & (name < 0))
    _domains(conn, info, strings, cols, rowid[d], pid[d], domain[d], name[d], tl)
    tl.nvtx_pids = np.unique(pid)
    return {"pid": pid, "etype": etype, "name": name, "domain": domain, "dur": dur, "range": is_range}


def _by_rowid(conn: sqlite3.Connection, exprs: str, rowids: np.ndarray) -> list[tuple]:
    """``SELECT rowid, <exprs>`` of the given NVTX rows (batched literal IN lists)."""
    out: list[tuple] = []
    for a in range(0, len(rowids), ROWID_BATCH):
        ids = ",".join(map(str, rowids[a:a + ROWID_BATCH].tolist()))
        out += conn.execute(f"SELECT rowid, {exprs} FROM NVTX_EVENTS WHERE rowid IN ({ids})").fetchall()
    return out


def _named_by_text(conn: sqlite3.Connection, strings, rowid: np.ndarray, name: np.ndarray,
                   need: np.ndarray) -> None:
    """Names of ranges without a registered string: coalesce(StringIds[textId], text)."""
    idx = np.flatnonzero(need)
    if not len(idx):
        return
    pos = {int(r): int(i) for r, i in zip(rowid[idx].tolist(), idx.tolist())}
    for rid, text in _by_rowid(conn, "text", rowid[idx]):
        if text is not None:
            name[pos[rid]] = strings.out.intern(str(text))


def _domains(conn, info, strings, cols, rowids, pid, domain, name, tl: T.Timeline) -> None:
    """Domain-create rows: nvtx_sum names a domain by ``text`` up to 2024.2, later by coalesce."""
    if not len(rowids):
        return
    text_col = "text" if "text" in cols else "NULL"
    got = {rid: (gtid, text) for rid, gtid, text in
           _by_rowid(conn, f"{R._expr(cols, 'globalTid', '0')}, {text_col}", rowids)}
    tid = np.array([int(got[r][0]) & 0xFFFFFF for r in rowids.tolist()], dtype=np.int32)
    texts = np.array([strings.out.intern(None if got[r][1] is None else str(got[r][1]))
                      for r in rowids.tolist()], dtype=np.int32)
    if info.naming == "plain":
        dname = texts
    else:
        dname = np.where(name >= 0, name, texts).astype(np.int32)
    R._fill_domains(tl, pid, domain, dname, tid)
