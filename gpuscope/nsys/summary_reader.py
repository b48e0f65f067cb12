"""Read only what the summaries need from an nsys export: no Timeline of the NVTX ranges.

``gpuscope report --json`` and the app's first paint need the ``nsys stats`` summaries, the process
table and the findings, not the ranges' threads, colours and nesting. Six NVTX columns come
through :func:`gpuscope.nsys.columns.read` (the file's pages by the compiled decoder, else
``sqlite3``: the same two read paths as the Timeline's) and give two int64 columns, computed in
numpy in place:

- ``dur`` = ``ifnull(end, -1) - start`` (a missing end reads as ``-1 - start``: negative);
- ``key`` = pid | min(eventType, 127) << 24 | (textId + 1) << 31 [| min(domainId, 65535) << 47]

(the domain travels in its own column when string ids reach 2^16). An export with negative
timestamps or an end before its start (where the sign of ``dur`` would be ambiguous) returns None
and is read through the Timeline reader. The few rows whose name or domain needs the ``text``
column or the thread are fetched afterwards by rowid.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscope.nsys import columns
from gpuscope.nsys import reader as R
from gpuscope.trace import summary as S
from gpuscope.trace import timeline as T

ROWID_BATCH = 20_000         # rowids per "WHERE rowid IN (...)" query
DOMAIN_IN_KEY_MAX_SID = (1 << 16) - 2   # string ids up to this leave the key's top 16 bits to the domain


@dataclass
class SummaryData:
    """What a report shows before (or without) its Timeline."""

    summaries: dict[str, list]
    processes: list[dict]
    notes: list[str]
    nvtx_kinds: dict[int, set[int]] | None = None   # pid -> NVTX event types (for diagnostics)


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
    procs = S.process_table(tl, nvtx_counts=(nvtx["range_counts"], nvtx["mark_counts"]))
    return SummaryData(summaries=sums, processes=procs, notes=list(tl.notes), nvtx_kinds=nvtx["kinds"])


_COLUMNS = ("start", "end", "eventType", "globalTid", "textId", "domainId")


def _scan(conn: sqlite3.Connection, cols: list[str], domain_in_key: bool) -> tuple | None:
    """(dur, key[, domain]), the number of non-NULL ends, min(start) and the rowids, from six NVTX
    columns; None where start or eventType is NULL (the Timeline reader then says what it makes of it)."""
    got = columns.read(conn, "NVTX_EVENTS", [c for c in _COLUMNS if c in cols])
    if got.null["start"].any() or got.null["eventType"].any():
        return None
    # Computed in place in the freshly read columns: each temporary of a large table costs page faults.
    v, null, n = got.values, got.null, len(got.rowid)
    start = v["start"]
    if "end" in v:
        dur = v["end"]
        np.copyto(dur, -1, where=null["end"])
        n_end = n - int(np.count_nonzero(null["end"]))
        dur -= start
    else:
        dur, n_end = -1 - start, 0
    key = v["globalTid"] if "globalTid" in v else np.zeros(n, np.int64)
    key >>= 24
    key &= 0xFFFFFF
    etype = np.minimum(v["eventType"], 127, out=v["eventType"])
    etype <<= 24
    key |= etype
    if "textId" in v:
        text_id = v["textId"]
        np.copyto(text_id, -1, where=null["textId"])
        text_id += 1
        text_id <<= 31
        key |= text_id
    domain = v["domainId"] if "domainId" in v else np.zeros(n, np.int64)
    if "domainId" in v:
        np.copyto(domain, 0, where=null["domainId"])
        np.minimum(domain, 65535, out=domain)
        domain &= 65535
    if domain_in_key:
        domain <<= 47
        key |= domain
        cols_out = [dur, key]
    else:
        cols_out = [dur, key, domain]
    return cols_out, n_end, (int(start.min()) if n else None), got.rowid


def _read_nvtx(conn: sqlite3.Connection, info: R.ExportInfo, strings, tl: T.Timeline) -> dict | None:
    """Decoded NVTX columns (pid, etype, name, domain, dur, range mask) and per-process counts."""
    empty: dict[str, Any] = {k: np.zeros(0, np.int64) for k in ("pid", "etype", "name", "domain", "dur")}
    empty.update(range=np.zeros(0, bool), range_counts={}, mark_counts={}, kinds={})
    if "NVTX_EVENTS" not in info.tables:
        return empty
    cols = R.table_columns(conn, "NVTX_EVENTS")
    max_sid = conn.execute("SELECT max(id) FROM StringIds").fetchone()[0] if "StringIds" in info.tables else 0
    max_sid = max_sid or 0
    if max_sid >= (1 << 31) - 2:
        return None
    domain_in_key = max_sid <= DOMAIN_IN_KEY_MAX_SID
    if "start" not in cols or "eventType" not in cols:
        return None
    scanned = _scan(conn, cols, domain_in_key)
    if scanned is None:
        return None
    got, n_end, lo_s, rowid = scanned
    n = len(rowid)
    if not n:
        return empty
    dur, key = got[0], got[1]
    if len(dur) != n or len(key) != n:
        raise R.UserError("NVTX_EVENTS: columns of unequal length; is the export corrupt?")
    no_end = dur < 0
    if lo_s is None or lo_s < 0 or int(no_end.sum()) != n - n_end:
        return None   # negative timestamps or an end before its start: the sign of dur is ambiguous
    pid = (key & 0xFFFFFF).astype(np.int32)
    etype = ((key >> 24) & 127).astype(np.int32)
    name = strings.map(((key >> 31) & 0xFFFF if domain_in_key else key >> 31) - 1)
    domain = ((key >> 47) if domain_in_key else got[2]).astype(np.int32)
    is_range = np.isin(etype, R.NVTX_RANGE_TYPES)
    if (no_end & is_range).any():    # nvtx_sum ends an unclosed range at M = max(max(start), max(end))
        last = max(v for v in conn.execute('SELECT max(start), max("end") FROM NVTX_EVENTS').fetchone()
                   if v is not None)
        dur = np.where(no_end, last + 1 + dur, dur)   # dur = -1 - start there
    d = etype == R.NVTX_DOMAIN_CREATE
    if "text" in cols:
        _named_by_text(conn, strings, rowid, name, is_range & (name < 0))
    _domains(conn, info, strings, cols, rowid[d], pid[d], domain[d], name[d], tl)
    kinds, range_counts, mark_counts = _kinds(key & 0x7FFFFFFF)
    tl.nvtx_pids = np.array(sorted(kinds), dtype=np.int32)
    return {"pid": pid, "etype": etype, "name": name, "domain": domain, "dur": dur, "range": is_range,
            "range_counts": range_counts, "mark_counts": mark_counts, "kinds": kinds}


def _kinds(pid_type: np.ndarray) -> tuple[dict[int, set[int]], dict[int, int], dict[int, int]]:
    """From pid | eventType << 24 per row: event types per pid, ranges per pid, marks per pid."""
    codes, counts = S.unique_counts(pid_type)
    kinds: dict[int, set[int]] = {}
    ranges: dict[int, int] = {}
    marks: dict[int, int] = {}
    for code, count in zip(codes.tolist(), counts.tolist()):
        pid, etype = code & 0xFFFFFF, code >> 24
        kinds.setdefault(pid, set()).add(etype)
        if etype in R.NVTX_RANGE_TYPES:
            ranges[pid] = ranges.get(pid, 0) + count
        elif etype == R.NVTX_MARK:
            marks[pid] = marks.get(pid, 0) + count
    return kinds, ranges, marks


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
