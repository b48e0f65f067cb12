"""Read an Nsight Systems SQLite export (2022.4 … 2025.x) into a :class:`Timeline`.

Tables are optional (nsys creates them lazily): a missing table is "no data of that kind".
Columns are selected by name. The NVTX table comes through :func:`gpuscope.nsys.columns.read` (the
file's pages, else ``sqlite3``); the other tables through ``sqlite3``
(:func:`gpuscope.nsys.columns.dense`).

The CLI and the app open reports through :func:`gpuscope.nsys.report.load_report`; this module
reads tables; :mod:`gpuscope.nsys.rep_export` turns a ``.nsys-rep`` into SQLite.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpuscope.errors import UserError
from gpuscope.nsys import columns
from gpuscope.nsys.columns import dense
from gpuscope.trace import timeline as T
from gpuscope.trace.summary import unique_counts

NVTX_RANGE_TYPES = (59, 60, 70, 71)
NVTX_MARK, NVTX_DOMAIN_CREATE, NVTX_CATEGORY = 34, 75, 33
OSRT_EVENT_CLASS = 27
KNOWN_SCHEMA = (3, 28)            # newest EXPORT_SCHEMA_VERSION major.minor this reader was written for
LAST_PLAIN_NAMING = (2024, 2, 3)  # nvtx_sum leaves default-domain ranges unprefixed up to this version
_NSYS_THREADS = ("[NSys]", "[NSys Comms]")


@dataclass
class ExportInfo:
    """Which export this is: tables, versions and the metadata key/values."""

    tables: set[str]
    meta: dict[str, str] = field(default_factory=dict)
    schema_version: str | None = None
    product_version: str | None = None

    @property
    def schema(self) -> tuple[int, ...]:
        return version_tuple(self.schema_version)

    @property
    def product(self) -> tuple[int, ...]:
        return version_tuple(self.product_version)

    @property
    def naming(self) -> str:
        """nvtx_sum's naming rule: ``"plain"`` (≤ 2024.2.3) or ``"colon"`` (``":name"``, later)."""
        if self.product:
            return "plain" if self.product[:3] <= LAST_PLAIN_NAMING else "colon"
        return "plain" if self.schema and self.schema <= (3, 11, 1) else "colon"

    @property
    def stats_generation(self) -> int:
        """2022 for the 2022.x report set (nvtxsum, gpukernsum by grid/block), else 2023."""
        v = self.product or ((2022,) if self.schema and self.schema < (3, 7) else (2023,))
        return 2022 if v[0] <= 2022 else 2023


def version_tuple(text: str | None) -> tuple[int, ...]:
    out = []
    for part in (text or "").split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


# --------------------------------------------------------------------------- opening

# What a damaged export raises from sqlite3: SQLite's own errors, and bytes that are not UTF-8
# where a text belongs (sqlite3 decodes texts as it hands them out).
DAMAGE = (sqlite3.DatabaseError, UnicodeDecodeError)


def damaged(path: str | Path, exc: BaseException) -> UserError:
    """One line for an export SQLite or its texts refused: the file, what went wrong, the likely cause."""
    what = " ".join(str(exc).split())   # SQLite quotes the damaged schema, newlines included
    if isinstance(exc, UnicodeDecodeError):
        what = "a text that is not UTF-8"
    if len(what) > 120:
        what = what[:117] + "..."
    return UserError(f"{path}: unreadable SQLite file ({what}); is it truncated or corrupt?")


def open_export(path: str | Path) -> sqlite3.Connection:
    """Open an nsys SQLite export read-only, or raise a one-line :class:`UserError`."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file")
    if p.is_dir():
        raise UserError(f"{p}: is a folder, not an Nsight Systems export")
    with open(p, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        raise UserError(f"{p}: not an SQLite file (expected an Nsight Systems .sqlite export or .nsys-rep)")
    try:
        conn = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except DAMAGE as exc:
        raise damaged(p, exc) from None
    nsys_marks = {"StringIds", "META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME"}
    if "StringIds" not in names or not names & (nsys_marks - {"StringIds"}):
        conn.close()
        raise UserError(f"{p}: an SQLite file, but not an Nsight Systems export (no StringIds/metadata tables)")
    return conn


def export_info(conn: sqlite3.Connection) -> ExportInfo:
    """Tables and version keys (``META_DATA_EXPORT``, else the 2022.4 ``EXPORT_META_DATA``)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    info = ExportInfo(tables=tables)
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA", "META_DATA_CAPTURE"):
        if table in tables:
            for name, value in conn.execute(f"SELECT name, value FROM {table}"):
                info.meta.setdefault(str(name), str(value))
    info.schema_version = info.meta.get("EXPORT_SCHEMA_VERSION")
    info.product_version = info.meta.get("EXPORT_PRODUCT_VERSION")
    return info


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


# Columns without which a known table cannot be read (others get defaults; unknown ones are ignored).
REQUIRED_COLUMNS = {
    "NVTX_EVENTS": ("start", "eventType"), "OSRT_API": ("start",),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start",), "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end"), "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end"),
    "StringIds": ("id", "value"),
}


def check_layout(conn: sqlite3.Connection, info: ExportInfo, path: str | Path) -> None:
    """Raise a one-line :class:`UserError` when a known table lacks a column the reader needs.

    Forward compatibility is tolerance: unseen version numbers, extra columns and extra tables
    read fine; a table that is there but changed what it cannot do without is refused clearly.
    """
    for table, needed in REQUIRED_COLUMNS.items():
        if table not in info.tables:
            continue
        have = set(table_columns(conn, table))
        for col in needed:
            if col not in have:
                version = info.product_version or info.schema_version or "unknown"
                raise UserError(f"{path}: {table} has no column {col} (nsys {version}); "
                                "an export layout this gpuscope cannot read")


def _expr(cols: list[str], name: str, default: str = "-1") -> str:
    """``coalesce(name, default)`` if the column exists, else the default (schema tolerance)."""
    return f"coalesce({name}, {default})" if name in cols else default


class _Strings:
    """nsys ``StringIds`` mapped onto the Timeline's string table."""

    def __init__(self, conn: sqlite3.Connection, tables: set[str], out: T.StringTable) -> None:
        self.out = out
        self.lut = np.full(1, -1, dtype=np.int32)
        self.sparse: tuple[np.ndarray, np.ndarray] | None = None   # (sorted nsys ids, Timeline ids)
        if "StringIds" not in tables:
            return
        rows = [r for r in conn.execute("SELECT id, value FROM StringIds")
                if isinstance(r[0], int) and 0 <= r[0] < 1 << 62]   # the last slot stays -1 (map)
        if not rows:
            return
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        sids = [out.intern(r[1] if not isinstance(r[1], bytes) else r[1].decode("utf-8", "replace")) for r in rows]
        if int(ids.max()) > 4 * len(rows) + 65536:   # nsys numbers strings densely: a damaged id, not a table
            order = np.argsort(ids, kind="stable")
            self.sparse = (ids[order], np.asarray(sids, dtype=np.int32)[order])
            return
        self.lut = np.full(int(ids.max()) + 2, -1, dtype=np.int32)
        self.lut[ids] = sids

    def map(self, nsys_ids: np.ndarray) -> np.ndarray:
        """Timeline string ids for nsys string ids (-1 / unknown -> -1)."""
        ids = np.asarray(nsys_ids, dtype=np.int64)
        if self.sparse is not None:
            keys, values = self.sparse
            pos = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
            return np.where(keys[pos] == ids, values[pos], -1).astype(np.int32)
        # lut's last slot is -1: ids below 0 or past the table clip onto it (one gather, no mask)
        return self.lut[np.clip(ids, -1, len(self.lut) - 1)]


def _pid(gtid: np.ndarray) -> np.ndarray:
    return ((gtid >> 24) & 0xFFFFFF).astype(np.int32)


def _tid(gtid: np.ndarray) -> np.ndarray:
    return (gtid & 0xFFFFFF).astype(np.int32)


# --------------------------------------------------------------------------- NVTX

def read_nvtx(conn: sqlite3.Connection, info: ExportInfo, strings: _Strings, tl: T.Timeline) -> None:
    """Fill ranges, marks and domains from ``NVTX_EVENTS``."""
    if "NVTX_EVENTS" not in info.tables:
        return
    got = _nvtx_columns(conn, strings)
    if not len(got[0]):
        return
    start, end, gtid, etype, domain, category, text_id, text, color, end_tid = got
    registered = strings.map(text_id)
    name = np.where(registered >= 0, registered, text).astype(np.int32)
    has_end = end >= 0
    last = max(int(start.max()), int(end[has_end].max())) if has_end.any() else int(start.max())
    tl.nvtx_last_ns = last
    _fill_ranges(tl, np.isin(etype, NVTX_RANGE_TYPES), start, np.where(has_end, end, last), has_end,
                 gtid, name, color, domain, category, etype, end_tid)
    tl.nvtx_pids = unique_counts(_pid(gtid))[0]
    m = etype == NVTX_MARK
    tl.marks = T.Marks(start_ns=start[m], pid=_pid(gtid[m]), tid=_tid(gtid[m]), name_id=name[m], color=color[m],
                       domain_id=domain[m], source=np.zeros(int(m.sum()), dtype=np.uint8))
    d = etype == NVTX_DOMAIN_CREATE
    # nvtx_sum up to 2024.2 names a domain by its row's ``text`` only; later builds coalesce textId.
    dname = text[d] if info.naming == "plain" else name[d]
    _fill_domains(tl, _pid(gtid[d]), domain[d], dname.astype(np.int32), _tid(gtid[d]))


_NVTX_COLUMNS = ["start", "end", "eventType", "category", "color", "globalTid", "endGlobalTid", "textId", "domainId"]


def _nvtx_columns(conn: sqlite3.Connection, strings: _Strings) -> tuple:
    """The NVTX columns (:func:`columns.read`: the file's pages, else ``sqlite3``), defaults filled."""
    got = columns.read(conn, "NVTX_EVENTS", _NVTX_COLUMNS, ("text",))
    n = len(got.rowid)

    def col(name: str, default: int) -> np.ndarray:
        return got.get(name, default) if name in got.values else np.full(n, default, np.int64)

    start = col("start", 0)
    end = col("end", -1)
    gtid = col("globalTid", 0) & 0xFFFFFFFFFFFF
    etype = col("eventType", 0) & 0xFF
    domain = (np.minimum(col("domainId", 0), 0xFFFF) & 0xFFFF).astype(np.int32)
    category = (np.minimum(col("category", 0), 0xFFFF) & 0xFFFF).astype(np.int32)
    text = np.full(n, -1, np.int32)
    if "text" in got.null:
        _text_by_rowid(conn, strings, got.rowid, np.flatnonzero(~got.null["text"]), text)
    color = (col("color", 0) & 0xFFFFFFFF).astype(np.uint32)
    end_tid = (col("endGlobalTid", 0) & 0xFFFFFF).astype(np.int32)
    return start, end, gtid, etype, domain, category, col("textId", -1), text, color, end_tid


def _text_by_rowid(conn: sqlite3.Connection, strings: _Strings, rowid: np.ndarray, idx: np.ndarray,
                   out: np.ndarray) -> None:
    """``out[i]`` = Timeline string id of the ``text`` of row ``i``, for the rows ``idx`` (batched)."""
    for a in range(0, len(idx), 20_000):
        part = idx[a:a + 20_000]
        ids = ",".join(map(str, rowid[part].tolist()))
        got = conn.execute(f"SELECT rowid, text FROM NVTX_EVENTS WHERE rowid IN ({ids})").fetchall()
        if not got:
            continue
        rids = np.fromiter((r[0] for r in got), dtype=np.int64, count=len(got))
        out[np.searchsorted(rowid, rids)] = [strings.out.intern(str(r[1])) for r in got]


def _fill_ranges(tl: T.Timeline, r: np.ndarray, start, end, has_end, gtid, name, color, domain,
                 category, etype, end_tid) -> None:
    tid = _tid(gtid[r])
    et = end_tid[r]
    other = (et != 0) & (et != tid)
    flags = np.where(has_end[r], 0, T.FLAG_END_MISSING) | np.where(other, T.FLAG_OTHER_THREAD, 0)
    tl.ranges = T.Ranges(
        start_ns=start[r], end_ns=end[r], pid=_pid(gtid[r]), tid=tid,
        depth=np.zeros(int(r.sum()), dtype=np.int16), name_id=name[r], color=color[r],
        domain_id=domain[r], category=category[r],
        style=np.isin(etype[r], (60, 71)).astype(np.uint8),
        source=np.zeros(int(r.sum()), dtype=np.uint8), flags=flags.astype(np.uint8),
        end_tid=np.where(other, et, -1).astype(np.int32))
    T.compute_depths(tl.ranges)


def _fill_domains(tl: T.Timeline, pid, domain, name, tid) -> None:
    """Domain-create rows grouped as nsys stats does: one row per (domain, thread), joined per process."""
    if not len(pid):
        return
    key = np.unique(np.stack([pid.astype(np.int64), domain, tid]), axis=1)
    pairs, counts = np.unique(key[:2], axis=1, return_counts=True)
    names = []
    for p, dom in pairs.T:
        hit = np.flatnonzero((pid == p) & (domain == dom))
        names.append(int(name[hit[0]]))   # the creating rows of one domain share its name
    tl.domains = T.Domains(pid=pairs[0].astype(np.int32), domain_id=pairs[1].astype(np.int32),
                           name_id=np.asarray(names, dtype=np.int32), count=counts.astype(np.int32))


# --------------------------------------------------------------------------- CPU / GPU calls

def read_calls(conn: sqlite3.Connection, info: ExportInfo, table: str, strings: _Strings,
               where: str = "") -> T.Calls:
    """``OSRT_API`` or ``CUPTI_ACTIVITY_KIND_RUNTIME`` rows as :class:`Calls`."""
    if table not in info.tables:
        return T.Calls.empty()
    cols = table_columns(conn, table)
    start, end, gtid, name, ecls, corr = dense(conn, table, [
        "start", _expr(cols, "end", "start"), _expr(cols, "globalTid", "0"), _expr(cols, "nameId"),
        _expr(cols, "eventClass"), _expr(cols, "correlationId")], where)
    return T.Calls(start_ns=start, end_ns=end, pid=_pid(gtid), tid=_tid(gtid), name_id=strings.map(name),
                   event_class=ecls.astype(np.int32), correlation=corr)


_GPU_IDS = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid"]


def _gpu_ids(conn: sqlite3.Connection, table: str, extra: list[str]) -> tuple[list[np.ndarray], dict]:
    cols = table_columns(conn, table)
    exprs = [_expr(cols, c, "0") for c in _GPU_IDS] + [_expr(cols, c) for c in extra]
    got = dense(conn, table, exprs)
    base = dict(start_ns=got[0], end_ns=got[1], device=got[2].astype(np.int32),
                context=got[3].astype(np.int32), stream=got[4].astype(np.int32),
                correlation=got[5], pid=_pid(got[6]))
    return got[7:], base


def read_kernels(conn: sqlite3.Connection, info: ExportInfo, strings: _Strings) -> T.Kernels:
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if table not in info.tables:
        return T.Kernels.empty()
    extra = ["demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"]
    got, base = _gpu_ids(conn, table, extra)
    return T.Kernels(**base, name_id=strings.map(got[0]), short_name_id=strings.map(got[1]),
                     grid=np.stack(got[2:5], axis=1).astype(np.int32),
                     block=np.stack(got[5:8], axis=1).astype(np.int32))


# 2022.4's hard-coded memcpy names (python/lib/nsysstats.py MEM_OPER_STRS_CTE), by copyKind id.
_MEMCPY_2022 = {0: "[CUDA memcpy Unknown]", 1: "[CUDA memcpy HtoD]", 2: "[CUDA memcpy DtoH]",
                3: "[CUDA memcpy HtoA]", 4: "[CUDA memcpy AtoH]", 5: "[CUDA memcpy AtoA]",
                6: "[CUDA memcpy AtoD]", 7: "[CUDA memcpy DtoA]", 8: "[CUDA memcpy DtoD]",
                9: "[CUDA memcpy HtoH]", 10: "[CUDA memcpy PtoP]", 11: "[CUDA Unified Memory memcpy HtoD]",
                12: "[CUDA Unified Memory memcpy DtoH]", 13: "[CUDA Unified Memory memcpy DtoD]"}


def _memcpy_labels(conn: sqlite3.Connection, info: ExportInfo) -> dict[int, str]:
    if info.stats_generation > 2022 and "ENUM_CUDA_MEMCPY_OPER" in info.tables:
        return {int(i): f"[CUDA memcpy {label}]"
                for i, label in conn.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    return dict(_MEMCPY_2022)


def read_memops(conn: sqlite3.Connection, info: ExportInfo, strings: _Strings) -> T.MemOps:
    parts = []
    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", T.MEMOP_MEMCPY), ("CUPTI_ACTIVITY_KIND_MEMSET", T.MEMOP_MEMSET)):
        if table not in info.tables:
            continue
        got, base = _gpu_ids(conn, table, ["copyKind", "bytes", "srcKind", "dstKind", "memKind"])
        copy_kind = got[0].astype(np.int32) if kind == T.MEMOP_MEMCPY else np.full(len(got[0]), -1, np.int32)
        src_kind = got[2].astype(np.int32) if kind == T.MEMOP_MEMCPY else np.full(len(got[0]), -1, np.int32)
        dst_kind = (got[3] if kind == T.MEMOP_MEMCPY else got[4]).astype(np.int32)
        if kind == T.MEMOP_MEMSET:
            names = np.full(len(copy_kind), strings.out.intern("[CUDA memset]"), dtype=np.int32)
        else:
            labels = _memcpy_labels(conn, info)
            lut = {k: strings.out.intern(labels.get(k, f"[CUDA memcpy {k}]")) for k in np.unique(copy_kind).tolist()}
            names = np.array([lut[k] for k in copy_kind.tolist()], dtype=np.int32)
        parts.append(T.MemOps(**base, kind=np.full(len(copy_kind), kind, np.uint8), copy_kind=copy_kind,
                              src_kind=src_kind, dst_kind=dst_kind, bytes=got[1], name_id=names))
    return T.MemOps.concat(parts)


def read_gpus(conn: sqlite3.Connection, info: ExportInfo) -> list[dict]:
    """The GPUs nsys saw (``TARGET_INFO_GPU``): ``id``, ``name``, ``uuid``, ``cuDevice`` (None where
    the export lacks the column); ``[]`` without the table."""
    if "TARGET_INFO_GPU" not in info.tables:
        return []
    have = set(table_columns(conn, "TARGET_INFO_GPU"))
    keys = ("id", "name", "uuid", "cuDevice")
    select = ", ".join(f'"{k}"' if k in have else "NULL" for k in keys)
    return [dict(zip(keys, row)) for row in conn.execute(f"SELECT {select} FROM TARGET_INFO_GPU")]


# --------------------------------------------------------------------------- processes, clock

def read_processes(conn: sqlite3.Connection, info: ExportInfo, strings: _Strings, tl: T.Timeline) -> None:
    """Processes that have events in any table; names from ``PROCESSES``, else the main thread's name.

    ``PROCESSES`` and ``ThreadNames`` list every process of the machine (kernel threads included)
    yet miss some profiled ones (spawn workers), so they only supply names.
    """
    names: dict[int, int] = {}
    if "PROCESSES" in info.tables:
        for pid, name in conn.execute("SELECT pid, name FROM PROCESSES"):
            if name is not None and pid is not None and pid >= 0:
                names[int(pid)] = strings.out.intern(str(name))
    threads: dict[tuple[int, int], int] = {}
    if "ThreadNames" in info.tables:
        for gtid, name_id in conn.execute("SELECT globalTid, nameId FROM ThreadNames"):
            if gtid is None or gtid < 0:
                continue
            sid = int(strings.map(np.array([name_id if name_id is not None else -1]))[0])
            if strings.out.get(sid) in _NSYS_THREADS:
                continue
            threads[(int(gtid) >> 24 & 0xFFFFFF, int(gtid) & 0xFFFFFF)] = sid
    tl.threads = T.Threads(pid=T.column("pid", [k[0] for k in threads]), tid=T.column("tid", [k[1] for k in threads]),
                           name_id=T.column("name_id", list(threads.values())))
    seen = [tl.nvtx_pids, tl.osrt.pid, tl.cuda_api.pid, tl.kernels.pid, tl.memops.pid]
    pids = unique_counts(np.concatenate(seen).astype(np.int32))[0]
    pids = pids[pids > 0]
    keep = np.isin(tl.threads.pid, pids)   # ThreadNames lists every thread of the machine
    tl.threads = tl.threads.take(keep)
    out = []
    for p in pids.tolist():
        sid = names.get(p, threads.get((p, p), -1))
        out.append(sid)
    tl.processes = T.Processes(pid=pids, name_id=T.column("name_id", out),
                               source=np.full(len(pids), 1 << T.SOURCE_NSYS, np.uint8))


def _first_row(conn: sqlite3.Connection, info: ExportInfo, table: str) -> dict | None:
    """The first row of a one-row table as {column: value}, or None when it is absent or empty."""
    if table not in info.tables:
        return None
    row = conn.execute(f"SELECT * FROM {table} LIMIT 1").fetchone()
    return dict(zip(table_columns(conn, table), row)) if row is not None else None


def read_clock(conn: sqlite3.Connection, info: ExportInfo, tl: T.Timeline) -> None:
    """Wall-clock (and, where exported, monotonic) time of the session start; session duration."""
    rec = _first_row(conn, info, "TARGET_INFO_SESSION_START_TIME")
    if rec is not None:
        tl.wall_base_ns = _int_or_none(rec.get("utcEpochNs"))
        mono = _int_or_none(rec.get("systemClockNs"))   # 2026 schema; used only if it looks monotonic
        if mono is not None and 0 < mono < 10**17:
            tl.mono_base_ns = mono
    if info.meta.get("EXPORT_PARAM_TIME_NORMALIZE", "").lower() == "true" and tl.wall_base_ns:
        # exported with --ts-normalize: timestamps are already UTC epoch ns (plus any --ts-shift)
        if tl.mono_base_ns is not None:
            tl.mono_base_ns -= tl.wall_base_ns
        tl.wall_base_ns = 0
        tl.notes.append("timestamps were exported as wall-clock ns (--ts-normalize=true)")
    rec = _first_row(conn, info, "ANALYSIS_DETAILS")
    if rec is not None:
        tl.duration_ns = _int_or_none(rec.get("duration"))
        # ANALYSIS_DETAILS.startTime is not on CLOCK_MONOTONIC (docs/NSYS-REPORTS.md, clock
        # alignment): alignment with gpuscope's logs goes through the wall clock instead.


def _int_or_none(v) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def read_timeline(conn: sqlite3.Connection, info: ExportInfo | None = None) -> T.Timeline:
    """The whole export as a Timeline (tables it lacks stay empty)."""
    info = info or export_info(conn)
    tl = T.Timeline()
    strings = _Strings(conn, info.tables, tl.strings)
    read_nvtx(conn, info, strings, tl)
    tl.osrt = read_calls(conn, info, "OSRT_API", strings)
    tl.cuda_api = read_calls(conn, info, "CUPTI_ACTIVITY_KIND_RUNTIME", strings)
    tl.kernels = read_kernels(conn, info, strings)
    tl.memops = read_memops(conn, info, strings)
    read_processes(conn, info, strings, tl)
    read_clock(conn, info, tl)
    add_schema_notes(info, tl)
    return tl


def add_schema_notes(info: ExportInfo, tl: T.Timeline) -> None:
    """Notes about a schema version this reader was not written for."""
    if info.schema and info.schema[:2] > KNOWN_SCHEMA:
        tl.notes.append(f"export schema {info.schema_version} is newer than this reader knows "
                        f"({'.'.join(map(str, KNOWN_SCHEMA))}); read what it could")
    if not info.schema:
        tl.notes.append("export has no EXPORT_SCHEMA_VERSION; assumed the 2022.4 layout")
