"""Why an nsys report has fewer NVTX ranges than expected: findings from an exported SQLite file.

nsys writes its own diagnostics into the export: as ``DIAGNOSTIC_EVENT`` rows with a process id
(2024.2+) or only as ``StringIds`` strings (2022.4, 2023.4). :func:`diagnose` reads both, plus the
``NVTX_EVENTS`` event types per process, and turns known problems into user-facing findings:

- ``nvtx-incompatible``: the ``nvtx`` package (0.2.12+) uses NVTX payload extension compat id 260,
  which nsys up to 2024.2 rejects, so it records no ranges at all (docs/NSYS-RECORDING.md);
- ``nvtx-domain-only``: processes with only domain create/destroy rows (types 75/76) and no NVTX
  event anywhere in the report, the same symptom when nsys left no message;
- ``nvtx-discarded-handles``: events using string handles registered before a fork were dropped;
- ``nvtx-none-collected``: nsys says a process collected no NVTX events;
- ``nothing-recorded``: not even OS runtime events: nsys's injection did not take (flaky nsys).

They are :class:`gpuscope.finding.Finding` objects (``source="nsys"``), the one format of
every finding gpuscope makes; the fork ones carry a structured fix for "Apply fix".
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.fix import SetNsysForkTracing

__all__ = ["Finding", "diagnose", "nvtx_pair_note", "product_version"]

RANGE_TYPES = (59, 60, 70, 71)     # push/pop, start/end (and their payload variants)
EVENT_TYPES = RANGE_TYPES + (33, 34)  # + category, mark
DOMAIN_TYPES = (75, 76)            # domain create / destroy
# nvtx releases that record under nsys <= 2024.2, and the newest nsys known to reject newer ones.
NVTX_MAX_OLD = "0.2.11"
NSYS_MAX_REJECTING = (2024, 2)

ADVICE_DISCARDED = ("use the spawn start method, or run under gpuscope, which re-registers NVTX strings in fork "
                    "children when nsys traces them (--trace-fork-before-exec=true)")
ADVICE_NONE_COLLECTED = ("if these are fork children, record with --trace-fork-before-exec=true and re-register NVTX "
                         "strings in the child (gpuscope does both for fork runs) or use spawn; otherwise the "
                         "process made no NVTX calls")

_INCOMPATIBLE = re.compile(r"payload extension is incompatible|compatibility ID 260 != 259", re.I)
_DISCARDED = re.compile(r"(\d+) NVTX annotations were discarded because they contained at least one invalid "
                        r"string handle")
_NONE_COLLECTED = re.compile(r"No NVTX events collected")


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _pid(global_pid: int | None) -> int | None:
    if global_pid is None or global_pid < 0:
        return None
    return (int(global_pid) >> 24) & 0xFFFFFF


def product_version(conn: sqlite3.Connection) -> str | None:
    """``EXPORT_PRODUCT_VERSION`` (e.g. "2022.4.2.1") from either metadata table name."""
    tables = _tables(conn)
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables:
            row = conn.execute(f"SELECT value FROM {table} WHERE name='EXPORT_PRODUCT_VERSION'").fetchone()
            if row:
                return str(row[0])
    return None


def _messages(conn: sqlite3.Connection, tables: set[str]) -> list[tuple[str, int | None]]:
    """(text, pid or None) for every diagnostic message; StringIds when there is no DIAGNOSTIC_EVENT."""
    out: list[tuple[str, int | None]] = []
    if "DIAGNOSTIC_EVENT" in tables:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(DIAGNOSTIC_EVENT)")}
        pid_col = "globalPid" if "globalPid" in cols else "NULL"
        out += [(str(t), _pid(g)) for t, g in conn.execute(f"SELECT text, {pid_col} FROM DIAGNOSTIC_EVENT")]
    if "StringIds" in tables:
        texts = {t for t, _ in out}
        for (value,) in conn.execute(
                "SELECT value FROM StringIds WHERE value LIKE '%NVTX%' AND length(value) < 2000"):
            if value not in texts:
                out.append((str(value), None))
    return out


def _nvtx_pids(conn: sqlite3.Connection, tables: set[str],
               kinds: dict[int, set[int]] | None = None) -> tuple[set[int], set[int]]:
    """(pids with NVTX events, pids with only domain rows); ``kinds`` (pid -> NVTX event types)
    when the caller has read them already (the summary reader's scan), else one DISTINCT query."""
    if "NVTX_EVENTS" not in tables:
        return set(), set()
    if kinds is None:
        kinds = {}
        for pid, etype in conn.execute(
                "SELECT DISTINCT (globalTid >> 24) & 16777215, eventType FROM NVTX_EVENTS"):
            kinds.setdefault(int(pid), set()).add(int(etype))
    with_events = {p for p, k in kinds.items() if k & set(EVENT_TYPES)}
    domain_only = {p for p, k in kinds.items() if k and k <= set(DOMAIN_TYPES)}
    return with_events, domain_only


def _fmt_pids(pids: set[int] | tuple[int, ...]) -> str:
    return ", ".join(str(p) for p in sorted(pids)) if pids else "the profiled program"


def incompatibility_advice(nsys_version: str | None) -> str:
    newer = f"{NSYS_MAX_REJECTING[0]}.{NSYS_MAX_REJECTING[1]}"
    return (f"pip install 'nvtx<={NVTX_MAX_OLD}' in the profiled environment, or use an Nsight Systems "
            f"newer than {newer}" + (f" (this report was recorded by {nsys_version})" if nsys_version else ""))


@dataclass
class _Facts:
    """What the rules look at, read once from the export."""

    tables: set[str]
    version: str | None
    messages: list[tuple[str, int | None]]
    with_events: set[int]
    domain_only: set[int]


def diagnose(conn: sqlite3.Connection | str | Path, nvtx_kinds: dict[int, set[int]] | None = None) -> list[Finding]:
    """Findings for an nsys SQLite export (a connection, or a path opened read-only).

    ``nvtx_kinds`` (pid -> set of NVTX event types), when given, saves a scan of ``NVTX_EVENTS``.
    """
    if not isinstance(conn, sqlite3.Connection):
        uri = f"file:{Path(conn).resolve()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as own:
            return diagnose(own, nvtx_kinds)
    tables = _tables(conn)
    facts = _Facts(tables, product_version(conn), _messages(conn, tables),
                   *_nvtx_pids(conn, tables, nvtx_kinds))
    return [f for rule in (_incompatible, _discarded, _silent) if (f := rule(facts))]


def _incompatible(x: _Facts) -> Finding | None:
    bad = [(t, p) for t, p in x.messages if _INCOMPATIBLE.search(t)]
    if bad:
        pids = tuple(sorted({p for _, p in bad if p is not None} | x.domain_only))
        return Finding(
            "nvtx-incompatible",
            f"nsys {x.version or ''} rejected the nvtx package's payload extension "
            f"(\"{bad[0][0].strip()}\"), so it recorded no NVTX ranges from {_fmt_pids(pids)}".replace("  ", " "),
            incompatibility_advice(x.version), Severity.ERROR, pids, _messages_evidence(bad, pids), source="nsys")
    if x.domain_only and not x.with_events:  # a process may just create a domain; alone it says little
        return Finding(
            "nvtx-domain-only",
            f"process(es) {_fmt_pids(x.domain_only)} created NVTX domains but recorded no ranges or marks "
            f"(typical of nvtx >= 0.2.12 under nsys <= {NSYS_MAX_REJECTING[0]}.{NSYS_MAX_REJECTING[1]})",
            incompatibility_advice(x.version), Severity.ERROR, tuple(sorted(x.domain_only)),
            evidence(pids=x.domain_only), source="nsys")
    return None


def _messages_evidence(bad: list[tuple[str, int | None]], pids: tuple[int, ...]):
    return evidence(excerpts=sorted({t.strip()[:300] for t, _ in bad})[:3], pids=pids)


def _discarded(x: _Facts) -> Finding | None:
    discarded = [(int(m.group(1)), p) for t, p in x.messages if (m := _DISCARDED.search(t))]
    if not discarded:
        return None
    return Finding(
        "nvtx-discarded-handles",
        f"nsys discarded {sum(n for n, _ in discarded)} NVTX annotation(s) that used a string handle or "
        f"domain registered before a fork (the fork child inherited the parent's handles)",
        ADVICE_DISCARDED, Severity.WARNING,
        tuple(sorted({p for _, p in discarded if p is not None})),
        evidence({"annotations discarded": sum(n for n, _ in discarded)}), SetNsysForkTracing(True), source="nsys")


def _silent(x: _Facts) -> Finding | None:
    silent = {p for t, p in x.messages if _NONE_COLLECTED.search(t) and p is not None} - x.with_events
    none_anywhere = any(_NONE_COLLECTED.search(t) for t, _ in x.messages)
    if none_anywhere and not x.tables & {"NVTX_EVENTS", "OSRT_API"}:
        return Finding(
            "nothing-recorded",
            "nsys recorded no NVTX and no OS runtime events at all: its injection into the program did "
            "not take effect (seen now and then with Debian's nsys builds)",
            "run again; if it keeps happening, run `gpuscope doctor`", Severity.ERROR, tuple(sorted(silent)),
            evidence(pids=silent), source="nsys")
    explained = any(_INCOMPATIBLE.search(t) for t, _ in x.messages) or x.domain_only
    # Some processes always make no NVTX calls (a spawn pool's resource tracker): a silent process is
    # worth a finding only beside discarded fork handles (then it is likely a fork child), or when no
    # process has NVTX events at all. With gpuscope's event logs, the coverage check knows exactly.
    forked = any(_DISCARDED.search(t) for t, _ in x.messages)
    if (silent and forked) or (none_anywhere and not x.with_events and not explained):
        return Finding(
            "nvtx-none-collected",
            f"nsys collected no NVTX events from {_fmt_pids(silent)}",
            ADVICE_NONE_COLLECTED, Severity.WARNING, tuple(sorted(silent)),
            evidence(pids=silent), SetNsysForkTracing(True) if forked else None, source="nsys")
    return None


def nvtx_pair_note(nvtx_version: str | None, nsys_version: tuple[int, ...]) -> str | None:
    """A warning when this nvtx release will record nothing under this nsys, else None."""
    if not nvtx_version:
        return None
    try:
        nv = tuple(int(x) for x in re.findall(r"\d+", nvtx_version)[:3])
    except ValueError:
        return None
    if nv >= (0, 2, 12) and tuple(nsys_version[:2]) <= NSYS_MAX_REJECTING:
        return (f"nvtx {nvtx_version} is too new for nsys {'.'.join(map(str, nsys_version))}: "
                f"nsys will record no NVTX ranges; {incompatibility_advice(None)}")
    return None
