"""Unit tests without nsys: math against SQLite, nesting, schema tolerance, Perfetto, event-log timelines.

``make_export`` writes a small nsys-shaped SQLite file (real SQLite; the layouts copy the 2022.4
and 2024.2 exports). Forward compatibility is tested as tolerance — unseen version numbers, unknown
extra columns and tables — never as a guessed future layout.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pytest

from gpuscope.errors import UserError
from gpuscope.nsys import reader
from gpuscope.nsys import report as nsys_report
from gpuscope.trace import perfetto, summary
from gpuscope.trace import timeline as T

NVTX_COLS = ("start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
             "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
             "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
             "floatValue REAL, jsonTextId INTEGER, jsonText TEXT")


def G(pid: int, tid: int) -> int:  # noqa: N802 - reads like nsys's globalTid in the rows below
    return (1 << 48) | (pid << 24) | tid


def make_export(path: Path, *, layout: str = "2022", nvtx: bool = True, kernels: bool = False,
                version: tuple[str, str] | None = None, extra_cols: bool = False) -> Path:
    """A minimal export: 2022 (EXPORT_META_DATA, 3.0.0) or 2024 (META_DATA_EXPORT, 3.11.1).

    ``version`` overrides (product, schema) version strings; ``extra_cols`` appends columns no nsys
    version has to every table (a reader must ignore them).
    """
    conn = sqlite3.connect(path)
    more = ", futureA INTEGER, futureB TEXT" if extra_cols else ""
    conn.execute(f"CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL{more})")
    meta = "EXPORT_META_DATA" if layout == "2022" else "META_DATA_EXPORT"
    conn.execute(f"CREATE TABLE {meta} (name TEXT, value TEXT)")
    version = version or {"2022": ("2022.4.2.1", "3.0.0"), "2024": ("2024.2.3.38", "3.11.1")}[layout]
    conn.executemany(f"INSERT INTO {meta} VALUES (?, ?)", [("EXPORT_PRODUCT_VERSION", version[0]),
                                                           ("EXPORT_SCHEMA_VERSION", version[1])])
    conn.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, "
                 f"localTime TEXT{more})")
    conn.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME (utcEpochNs, utcTime, localTime) "
                 "VALUES (1700000000000000000, '', '')")
    strings = ["outer", "inner", "python3", "[NSys]", "op", "read", "k1", "k2"]
    conn.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)", list(enumerate(strings)))
    conn.execute("CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
                 "globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, "
                 f"callchainId INTEGER{more})")
    conn.executemany("INSERT INTO OSRT_API (start, end, eventClass, globalTid, nameId, returnValue, nestingLevel) "
                     "VALUES (?,?,27,?,5,0,0)", [(10, 20, G(10, 10)), (30, 45, G(10, 10))])
    if nvtx:
        conn.execute(f"CREATE TABLE NVTX_EVENTS ({NVTX_COLS}{more})")
        rows = [
            (100, 900, 59, None, None, None, None, G(10, 10), None, 0, 0),
            (200, 300, 59, None, None, None, None, G(10, 10), None, 1, 0),
            (400, 500, 59, None, None, None, None, G(10, 10), None, 1, 0),
            (50, None, 75, None, None, None, "mydom", G(10, 10), None, None, 1),
            (600, 700, 59, None, 1, 0xFF0000FF, None, G(10, 10), None, 4, 1),
            (650, None, 34, None, None, None, None, G(10, 11), None, 4, 0),
            (100, 4000, 60, 1, None, None, "se", G(11, 11), G(11, 12), None, 0),
            (100, None, 59, None, None, None, "unclosed", G(11, 11), None, None, 0),
        ]
        conn.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, category, color, text, globalTid,"
                         " endGlobalTid, textId, domainId) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    if kernels:
        green = "greenContextId INTEGER, " if layout != "2022" else ""
        conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
                     f"deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, "
                     "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
                     "shortName INTEGER NOT NULL, gridX INTEGER, gridY INTEGER, gridZ INTEGER, "
                     f"blockX INTEGER, blockY INTEGER, blockZ INTEGER{more})")
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
                         "correlationId, globalPid, demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, "
                         "blockZ)"
                         " VALUES (?,?,0,1,7,?,?,?,?,?,1,1,128,1,1)",
                         [(1000 + i * 100, 1050 + i * 100 + i, i, G(10, 0), 6 + i % 2, 6 + i % 2, 1 + i // 3)
                          for i in range(6)])
    conn.execute(f"CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER{more})")
    conn.executemany("INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?,0,?)",
                     [(2, G(10, 10)), (3, G(10, 13)), (2, G(99, 99))])
    conn.execute(f"CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT{more})")
    conn.execute("INSERT INTO PROCESSES (globalPid, pid, name) VALUES (?, 10, 'python3')", (G(10, 0),))
    if extra_cols:
        conn.execute("CREATE TABLE SOME_FUTURE_TABLE (x INTEGER)")
    conn.commit()
    conn.close()
    return path


# --------------------------------------------------------------------------- math vs SQLite

def test_sqlite_round_matches_sqlite():
    rng = random.Random(1)
    values = [rng.randint(0, 10**9) / 4 for _ in range(3000)] + [rng.random() * 1e6 for _ in range(3000)]
    values += [200167078.25, 0.05, 0.15, 2.5, 1e17 + 0.5, -2.25, 12345.65]
    conn = sqlite3.connect(":memory:")
    for v in values:
        assert summary.sqlite_round(v) == conn.execute("SELECT round(?, 1)", (v,)).fetchone()[0], v
    assert summary.sqlite_round(200167078.25) == 200167078.3   # Python's round gives .2


def test_group_stats_match_reference():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 40, 5000)
    dur = rng.integers(1, 10**7, 5000)
    g = summary.group_stats(keys, dur)
    for i, k in enumerate(g.key.tolist()):
        d = sorted(dur[keys == k].tolist())
        assert g.count[i] == len(d) and g.total[i] == sum(d)
        assert g.minimum[i] == d[0] and g.maximum[i] == d[-1]
        n = len(d)
        med = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
        assert g.median[i] == med and type(g.median[i]) is type(med)
        ref = statistics.stdev(d) if n > 1 else 0.0
        assert math.isclose(g.stdev[i], ref, rel_tol=1e-12, abs_tol=1e-9)


def test_single_instance_stdev_is_zero():
    g = summary.group_stats(np.array([1]), np.array([77]))
    assert g.stdev[0] == 0.0 and g.median[0] == 77


# --------------------------------------------------------------------------- nesting

def _stack_depths(starts, ends):
    order = sorted(range(len(starts)), key=lambda i: (starts[i], -ends[i]))
    out, stack = [0] * len(starts), []
    for i in order:
        while stack and ends[stack[-1]] <= starts[i]:
            stack.pop()
        out[i] = len(stack)
        stack.append(i)
    return out


@pytest.fixture(params=["compiled", "numpy"])
def depth_impl(request, monkeypatch):
    """nesting_depth through the compiled walk (``_nesting.c``) or numpy's steps."""
    if request.param == "numpy":
        monkeypatch.setenv("GPUSCOPE_NO_COMPILED", "1")
    else:
        assert T._nesting is not None, "the compiled nesting module is not built: pip install -e . builds it"
        monkeypatch.delenv("GPUSCOPE_NO_COMPILED", raising=False)
    return request.param


def test_nesting_depth_matches_a_stack(depth_impl):
    rng = random.Random(2)
    starts, ends, groups = [], [], []
    for g in range(5):   # random properly nested push/pop sequences per thread
        t, stack = 0, []
        for _ in range(400):
            t += rng.randint(0, 3)
            if stack and rng.random() < 0.5:
                s = stack.pop()
                starts.append(s)
                ends.append(t)
                groups.append(g)
            else:
                stack.append(t)
        while stack:
            t += 1
            starts.append(stack.pop())
            ends.append(t)
            groups.append(g)
    s, e, gr = np.array(starts), np.array(ends), np.array(groups)
    depth = T.nesting_depth(gr, s, e)
    for g in range(5):
        m = gr == g
        assert depth[m].tolist() == _stack_depths(s[m].tolist(), e[m].tolist())


def test_nesting_depth_compiled_equals_numpy_on_ties_overlaps_and_zero_lengths(monkeypatch):
    """Equal starts (longest first), equal (start, end) pairs, zero-length ranges, start/end ranges
    that overlap without nesting, many groups in any row order, negative and huge times (the
    packed-key fallback): both implementations give the same depth to every row."""
    assert T._nesting is not None, "the compiled nesting module is not built: pip install -e . builds it"
    rng = np.random.default_rng(5)
    for case in range(6):
        n = 20_000
        start = rng.integers(0, 50 if case < 3 else 10**6, n)
        length = np.where(rng.random(n) < 0.2, 0, rng.integers(0, 40 if case < 3 else 10**5, n))
        if case == 4:
            start = start - 10**5   # negative times
        if case == 5:
            start = start * (1 << 40)   # a span that does not fit the packed (group, time) key
            length = length * (1 << 40)
        group = rng.integers(0, 1 if case == 0 else 7, n)
        end = start + length
        compiled = T.nesting_depth(group, start, end)
        monkeypatch.setenv("GPUSCOPE_NO_COMPILED", "1")
        reference = T.nesting_depth(group, start, end)
        monkeypatch.delenv("GPUSCOPE_NO_COMPILED")
        assert compiled.dtype == reference.dtype == np.int16
        assert np.array_equal(compiled, reference), case
        assert compiled.max() > 3   # the cases do nest


# --------------------------------------------------------------------------- reader: schema tolerance

UNSEEN = ("2031.1.0.5", "9.4.0")   # version numbers no nsys has (yet): read as the layout it has


@pytest.mark.parametrize("layout,version,extra", [("2022", None, False), ("2024", None, False),
                                                  ("2024", UNSEEN, True)],
                         ids=["2022.4", "2024.2", "unseen-version-extra-columns"])
def test_reader_across_layouts(tmp_path, layout, version, extra):
    p = make_export(tmp_path / "x.sqlite", layout=layout, kernels=True, version=version, extra_cols=extra)
    rep = nsys_report.load_report(p)
    tl = rep.timeline
    assert rep.schema_version and rep.nsys_version
    assert len(tl.ranges) == 6 and len(tl.marks) == 1 and len(tl.osrt) == 2 and len(tl.kernels) == 6
    assert sorted(tl.processes.pid.tolist()) == [10, 11]          # pid 99 has only a thread name
    assert tl.process_name(10) == "python3" and tl.process_name(11) == "pid 11"
    assert [tl.name(i) for i in tl.threads.name_id] == ["python3"]  # [NSys] hidden
    names = {(r.name, r.style): r for r in rep.summaries["nvtx"]}
    prefix = "" if version is None else ":"   # nvtx_sum after 2024.2.3 writes default-domain ranges as ":name"
    assert ("mydom:op", "PushPop") in names and (prefix + "outer", "PushPop") in names
    assert names[(prefix + "unclosed", "PushPop")].total_ns == 4000 - 100   # end = latest NVTX timestamp
    assert rep.naming == ("colon" if version else "plain")
    notes = " ".join(rep.notes)
    assert ("newer than this reader knows" in notes) == (version is not None)
    se = np.flatnonzero(tl.ranges.style == T.STYLE_STARTEND)
    assert tl.ranges.end_tid[se].tolist() == [12] and tl.ranges.flags[se][0] & T.FLAG_OTHER_THREAD
    k = rep.summaries["kernel"]
    assert len(k) == (4 if layout == "2022" else 2)                     # 2022: by name + grid/block
    assert tl.wall_base_ns == 1700000000000000000


def test_unknown_columns_change_nothing(tmp_path):
    """Extra columns and tables no nsys version has are ignored: same summaries, same timeline."""
    plain = nsys_report.load_report(make_export(tmp_path / "a.sqlite", layout="2024", kernels=True))
    extra = nsys_report.load_report(make_export(tmp_path / "b.sqlite", layout="2024", kernels=True, extra_cols=True))
    for key in plain.summaries:
        assert [r.to_dict() for r in extra.summaries[key]] == [r.to_dict() for r in plain.summaries[key]], key
    assert extra.processes == plain.processes
    for name, col in plain.timeline.ranges.columns().items():
        assert np.array_equal(col, extra.timeline.ranges.columns()[name]), name


@pytest.mark.parametrize("table,column", [("NVTX_EVENTS", "eventType"), ("OSRT_API", "start")])
def test_missing_required_column_is_one_line_error(tmp_path, table, column):
    """A known table without a column the reader cannot do without: one line naming both."""
    p = make_export(tmp_path / "x.sqlite", layout="2024")
    conn = sqlite3.connect(p)
    conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.commit()
    conn.close()
    with pytest.raises(UserError) as err:
        nsys_report.load_report(p)
    assert f"{table} has no column {column}" in str(err.value) and "\n" not in str(err.value)


def test_missing_string_table_is_one_line_error(tmp_path):
    p = make_export(tmp_path / "x.sqlite", layout="2024")
    conn = sqlite3.connect(p)
    conn.execute("DROP TABLE StringIds")
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match="not an Nsight Systems export") as err:
        nsys_report.load_report(p)
    assert "\n" not in str(err.value)


def test_missing_tables_are_no_data(tmp_path):
    rep = nsys_report.load_report(make_export(tmp_path / "x.sqlite", nvtx=False))
    assert len(rep.timeline.ranges) == 0 and rep.summaries["nvtx"] == [] and rep.summaries["kernel"] == []
    assert len(rep.summaries["osrt"]) == 1 and rep.summaries["osrt"][0].count == 2


def test_not_an_export(tmp_path):
    p = tmp_path / "x.sqlite"
    sqlite3.connect(p).execute("CREATE TABLE a (b)").connection.commit()
    with pytest.raises(UserError, match="not an Nsight Systems export"):
        nsys_report.load_report(p)


def test_domain_created_on_two_threads_counts_twice(tmp_path):
    """nsys stats joins domain rows per process: a domain created on two threads doubles its ranges."""
    p = make_export(tmp_path / "x.sqlite")
    conn = sqlite3.connect(p)
    conn.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (60, 75, 'mydom', ?, 1)",
                 (G(10, 14),))
    conn.commit()
    conn.close()
    rows = {r.name: r for r in nsys_report.load_report(p).summaries["nvtx"]}
    assert rows["mydom:op"].count == 2 and rows["mydom:op"].total_ns == 200


# --------------------------------------------------------------------------- Perfetto

def test_perfetto_structure(tmp_path):
    rep = nsys_report.load_report(make_export(tmp_path / "x.sqlite", kernels=True))
    out = tmp_path / "trace.json"
    n = perfetto.write(rep.timeline, out)
    data = json.loads(out.read_text())
    events = data["traceEvents"]
    assert len(events) == n
    by_ph: dict[str, list] = {}
    for ev in events:
        assert {"ph", "pid", "name"} <= ev.keys()
        by_ph.setdefault(ev["ph"], []).append(ev)
    # Independent of perfetto.counts: what make_export wrote (6 ranges, 1 mark, 6 kernels, 2 OS calls).
    x_names = sorted(e["name"] for e in by_ph["X"])
    assert x_names == sorted(["outer", "inner", "inner", "op", "se", "unclosed", "read", "read"]
                             + ["k1", "k2"] * 3)
    assert [e["name"] for e in by_ph["i"]] == ["op"]
    assert perfetto.counts(rep.timeline) == {"X": 14, "i": 1}
    meta = {(e["name"], e["pid"], e.get("tid")) for e in by_ph["M"]}
    assert ("process_name", 10, 0) in meta and ("thread_name", 10, 10) in meta
    gpu_tracks = {e["tid"] for e in by_ph["X"] if e["cat"] == "cuda_kernel"}
    assert gpu_tracks == {perfetto.GPU_TRACK + 7}
    se = [e for e in by_ph["X"] if e["name"] == "se"]
    assert se[0]["tid"] == perfetto.STARTEND_TRACK + 11 and se[0]["dur"] == 3.9   # 3900 ns
    assert perfetto.us(1234567) == "1234.567" and perfetto.us(-1) == "-0.001"


# --------------------------------------------------------------------------- event logs

def write_log(folder: Path, pid: int, *, forked: bool, ranges: int, exit_ok: bool = True, mono0: int = 10**12) -> None:
    header = {"v": 1, "pid": pid, "ppid": 1, "anchor_mono_ns": mono0, "anchor_wall_ns": 1700000000000000000 + mono0,
              "role": "pool worker" if forked else "main", "start_method": "fork", "forked": forked, "nvtx": "0.2.11"}
    lines = ["H\t" + json.dumps(header), "S\t0\tnvtx\t\texpensive_op\t#008000", "S\t1\ttask\tgpuscope\twork\t"]
    for i in range(ranges):
        t = mono0 + 1000 + i * 100
        lines.append(f"R\t{t + 10}\t{t + 50}\t{pid}\t0\tP")
        lines.append(f"R\t{t}\t{t + 60}\t{pid}\t1\tP")
    lines.append(f"R\t{mono0 + 7}\t{mono0 + 10**5}\t{pid}\t0\tS")       # a start/end range
    lines.append(f"M\t{mono0 + 5}\t{pid}\t0")
    if exit_ok:
        lines.append(f"X\t{mono0 + 10**6}\t" + json.dumps({"exit_code": 0, "open_ranges": 0}))
    (folder / f"{pid}-{mono0}.log").write_text("\n".join(lines) + "\n")


def test_timeline_from_event_logs(tmp_path):
    from gpuscope.trace import coverage
    from gpuscope.trace.events import read_run_events

    (tmp_path / "events").mkdir()
    write_log(tmp_path / "events", 100, forked=False, ranges=3)
    write_log(tmp_path / "events", 101, forked=True, ranges=2, mono0=10**12 + 500)
    tl = coverage.timeline_from_events(read_run_events(tmp_path))
    assert len(tl.ranges) == 12 and set(tl.ranges.source.tolist()) == {T.SOURCE_GPUSCOPE}
    assert int((tl.ranges.style == T.STYLE_STARTEND).sum()) == 2
    assert tl.mono_base_ns == 10**12 and int(tl.ranges.start_ns.min()) == 7
    inner = (tl.ranges.name_id == tl.strings.lookup("expensive_op")) & (tl.ranges.style == T.STYLE_PUSHPOP)
    assert set(tl.ranges.depth[inner].tolist()) == {1}
    rows = {r.name: r for r in summary.nvtx_summary(tl, source=T.SOURCE_GPUSCOPE)}
    assert rows["gpuscope:work"].count == 5 and rows["expensive_op"].count == 5
    assert {r.style for r in rows.values()} == {"PushPop"}   # name keys collide: check via the timeline
    se = summary.nvtx_summary(tl, source=T.SOURCE_GPUSCOPE)
    assert [(r.name, r.style, r.count) for r in se if r.style == "StartEnd"] == [("expensive_op", "StartEnd", 2)]
    rep = nsys_report.load_report(tmp_path)            # a run folder without nsys
    assert rep.sqlite_path is None and len(rep.processes) == 2


def test_coverage_flags_forked_process(tmp_path):
    (tmp_path / "events").mkdir()
    write_log(tmp_path / "events", 10, forked=False, ranges=2)               # 5 logged, nsys has 4
    write_log(tmp_path / "events", 21, forked=True, ranges=2)                # fork child, missed
    write_log(tmp_path / "events", 22, forked=False, ranges=3, exit_ok=False)  # killed, missed
    make_export(tmp_path / "report.sqlite")
    rep = nsys_report.load_report(tmp_path)
    cov = {p.pid: p for p in rep.coverage.processes}
    assert cov[10].status == "partial" and cov[10].lost == 1 and "nsys has 4 of 5" in cov[10].reason
    assert cov[21].status == "missing" and "--trace-fork-before-exec" in cov[21].reason and cov[21].lost == 5
    assert "spawn" in cov[21].fix
    assert cov[22].status == "missing" and "normal shutdown" in cov[22].reason and cov[22].lost == 7
    assert cov[11].status == "nsys-only"
    merged = rep.timeline.ranges
    for pid, n in ((21, 5), (22, 7)):
        assert (merged.pid == pid).sum() == n and (merged.source[merged.pid == pid] == T.SOURCE_GPUSCOPE).all()
    assert (merged.source[merged.pid == 10] == T.SOURCE_NSYS).all()
    assert {p["pid"] for p in rep.processes} == {10, 11, 21, 22}


def test_run_summary_keeps_nsys_rows_and_marks_gpuscope_records(tmp_path):
    """A run whose processes nsys missed (issue 16.3): nsys's NVTX rows are the bare export's
    (= nsys stats), then one row per name of gpuscope's records, marked; together they count
    every range the timeline draws."""
    (tmp_path / "events").mkdir()
    write_log(tmp_path / "events", 10, forked=False, ranges=2)               # nsys has it (partial)
    write_log(tmp_path / "events", 21, forked=True, ranges=2)                # missed: 5 ranges
    write_log(tmp_path / "events", 22, forked=False, ranges=3, exit_ok=False)  # missed: 7 ranges
    export = make_export(tmp_path / "report.sqlite")
    bare = nsys_report.load_report(export, use_cache=False).summaries["nvtx"]
    rep = nsys_report.load_report(tmp_path, use_cache=False)
    rows = rep.summaries["nvtx"]
    nsys_rows = [r for r in rows if r.source is None]
    own = [r for r in rows if r.source is not None]
    assert [r.to_dict() for r in nsys_rows] == [r.to_dict() for r in bare]
    assert {r.source for r in own} == {"gpuscope"} and summary.source_text(own[0]) == summary.RECORD_MARK
    assert {(r.name, r.style, r.count) for r in own} == {
        ("gpuscope:work", "PushPop", 5), ("expensive_op", "PushPop", 5), ("expensive_op", "StartEnd", 2)}
    assert sum(r.count for r in own) == int((rep.timeline.ranges.source == T.SOURCE_GPUSCOPE).sum()) == 12
    assert round(sum(r.time_pct for r in own)) == 100 and rows.index(own[0]) == len(nsys_rows)
    assert any("12 range(s) of 2 process(es)" in n for n in rep.notes)
    assert all("source" not in r.to_dict() for r in nsys_rows) and own[0].to_dict()["source"] == "gpuscope"


def test_run_folder_shows_tables_before_its_timeline(tmp_path):
    """A run whose processes nsys all kept: coverage and the named process table come without
    reading the Timeline; the Timeline read later carries the same names (issue 14, part 3)."""
    from gpuscope.trace import coverage

    (tmp_path / "events").mkdir()
    write_log(tmp_path / "events", 10, forked=False, ranges=2)   # nsys has 4 of its 5: partial, not missing
    make_export(tmp_path / "report.sqlite")
    rep = nsys_report.load_report(tmp_path)
    assert rep.loaded is None                                    # the Timeline is not read yet
    assert {p.pid: p.status for p in rep.coverage.processes} == {10: "partial", 11: "nsys-only"}
    early = rep.processes
    assert [p["name"] for p in early if p["pid"] == 10] == ["main"]
    tl = rep.timeline
    assert tl.process_name(10) == "main"
    assert early == summary.process_table(tl)                   # what the eager merge gave
    # the same run with the Timeline already read takes the eager path: same table
    eager = nsys_report.load_report(tmp_path / "report.sqlite")
    assert eager.timeline is not None
    coverage.attach_run(eager, tmp_path)
    assert eager.processes == early


def test_main_exited_and_events_only_report(tmp_path):
    """The app's early timeline under nsys: the main process's exit record says the program ended;
    ``load_events`` reads the logs alone even when the folder already holds an export."""
    from gpuscope.trace.events import main_exited

    (tmp_path / "events").mkdir()
    assert not main_exited(tmp_path)
    write_log(tmp_path / "events", 21, forked=True, ranges=1)                # a worker that exited
    write_log(tmp_path / "events", 10, forked=False, ranges=2, exit_ok=False)  # main still running
    assert not main_exited(tmp_path)
    write_log(tmp_path / "events", 10, forked=False, ranges=2)
    assert main_exited(tmp_path)
    make_export(tmp_path / "report.sqlite")
    rep = nsys_report.load_events(tmp_path, note=nsys_report.PENDING_NOTE)
    assert rep.sqlite_path is None and rep.notes == [nsys_report.PENDING_NOTE]
    assert set(rep.timeline.ranges.source.tolist()) == {T.SOURCE_GPUSCOPE} and len(rep.timeline.ranges) == 8


def _cached(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "cache" / "timelines").glob("*.npz"))


def test_report_cache_round_trip(tmp_path, monkeypatch):
    """A cached report gives the same summaries, processes, findings and timeline columns."""
    monkeypatch.setenv("GPUSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nsys_report, "CACHE_MIN_ROWS", 1)     # the real threshold: test below
    p = make_export(tmp_path / "x.sqlite", kernels=True)
    first = nsys_report.load_report(p)
    assert first.loaded is None and not _cached(tmp_path)     # summaries first, timeline on demand
    a = first.timeline
    assert len(_cached(tmp_path)) == 1                         # stored once the timeline was read
    second = nsys_report.load_report(p)
    assert second.loaded is None and second.loader is not None        # timeline not read yet
    assert [r.to_dict() for r in second.summaries["nvtx"]] == [r.to_dict() for r in first.summaries["nvtx"]]
    assert second.summaries["kernel"] == first.summaries["kernel"]
    assert second.processes == first.processes and second.findings == first.findings
    b = second.timeline
    for table in ("ranges", "marks", "kernels", "osrt", "threads", "processes", "domains"):
        for name, col in getattr(a, table).columns().items():
            assert np.array_equal(col, getattr(getattr(b, table), name)), (table, name)
    assert a.strings.values == b.strings.values and a.wall_base_ns == b.wall_base_ns
    third = nsys_report.load_report(p, use_cache=False)
    assert len(third.timeline.ranges) == 6


def _add_ranges(path: Path, n: int) -> None:
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId) "
                     "VALUES (?, ?, 59, ?, 0, 0)", ((1000 + i, 1001 + i, G(10, 10)) for i in range(n)))
    conn.commit()
    conn.close()


def test_report_cache_real_threshold(tmp_path, monkeypatch):
    """With the shipped CACHE_MIN_ROWS: one row below it is not cached, a report at it is."""
    monkeypatch.setenv("GPUSCOPE_CACHE", str(tmp_path / "cache"))
    rows = nsys_report.CACHE_MIN_ROWS
    assert rows >= 10_000                                     # the constant, not a test override
    base = 6 + 2                                              # make_export: 6 ranges, 2 OS runtime calls
    below = make_export(tmp_path / "below.sqlite")
    _add_ranges(below, rows - 1 - base)
    at = make_export(tmp_path / "at.sqlite")
    _add_ranges(at, rows - base)
    assert len(nsys_report.load_report(below).timeline.ranges) == rows - 1 - 2
    assert not _cached(tmp_path)
    first = nsys_report.load_report(at)
    assert len(first.timeline.ranges) == rows - 2 and len(_cached(tmp_path)) == 1
    again = nsys_report.load_report(at)
    assert again.loaded is None                               # served by the cache
    assert again.summaries["nvtx"][0].count == first.summaries["nvtx"][0].count


@pytest.mark.parametrize("scan", ["pages", "sql"])
@pytest.mark.parametrize("variant", ["2022", "2024", "holes", "domain-twice", "text-only"])
def test_summary_reader_equals_timeline_summaries(tmp_path, variant, scan, monkeypatch):
    """The summary-only reader (first open) gives what the Timeline's summaries give, whether its
    NVTX columns come through SQL or from the pages by the compiled decoder (which then is the one used)."""
    from gpuscope.nsys import columns
    from gpuscope.nsys.summary_reader import read_summary_data

    if scan == "sql":
        monkeypatch.setenv("GPUSCOPE_NO_COMPILED", "1")
    else:
        monkeypatch.setattr(columns, "sql_columns", lambda *a: pytest.fail("the sqlite3 path ran"))

    p = make_export(tmp_path / "x.sqlite", layout="2022" if variant == "2022" else "2024", kernels=True)
    conn = sqlite3.connect(p)
    if variant == "holes":
        conn.execute("DELETE FROM NVTX_EVENTS WHERE start = 200")
    if variant == "domain-twice":
        conn.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) "
                     "VALUES (60, 75, 'mydom', ?, 1)", (G(10, 14),))
    if variant == "text-only":
        conn.execute("UPDATE NVTX_EVENTS SET text = 'txt' || start, textId = NULL WHERE eventType = 59")
    conn.commit()
    conn.close()
    conn = reader.open_export(p)
    info = reader.export_info(conn)
    quick = read_summary_data(conn, info)
    tl = reader.read_timeline(conn, info)
    conn.close()
    full = summary.all_summaries(tl, naming=info.naming, generation=info.stats_generation)
    assert quick is not None and quick.summaries.keys() == full.keys()
    for key in full:
        assert [r.to_dict() for r in quick.summaries[key]] == [r.to_dict() for r in full[key]], key
    assert quick.processes == summary.process_table(tl) and quick.notes == tl.notes
    want = 7 if variant == "domain-twice" else 6 - (variant == "holes")
    assert sum(r.count for r in quick.summaries["nvtx"]) == want


def test_read_gpus(tmp_path):
    """TARGET_INFO_GPU rows by name; an export without the table (or a column) gives [] (None)."""
    p = make_export(tmp_path / "x.sqlite", layout="2024")
    conn = reader.open_export(p)
    assert reader.read_gpus(conn, reader.export_info(conn)) == []
    conn.close()
    w = sqlite3.connect(p)
    w.execute("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, uuid TEXT, busLocation TEXT)")
    w.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 1, 'NVIDIA H200', 'GPU-1234', '0000:01:00.0')")
    w.commit()
    w.close()
    conn = reader.open_export(p)
    assert reader.read_gpus(conn, reader.export_info(conn)) == [
        {"id": 1, "name": "NVIDIA H200", "uuid": "GPU-1234", "cuDevice": None}]
    conn.close()


def test_rowid_holes_and_normalized_times(tmp_path):
    """Rowids with gaps (a deleted row), exported with --ts-normalize (UTC epoch timestamps)."""
    p = make_export(tmp_path / "x.sqlite", layout="2024")
    conn = sqlite3.connect(p)
    conn.execute("DELETE FROM NVTX_EVENTS WHERE start = 200")          # a hole before the text rows
    conn.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_TIME_NORMALIZE', 'true')")
    conn.execute("UPDATE NVTX_EVENTS SET start = start + 1700000000000000000, "
                 "end = end + 1700000000000000000")
    conn.commit()
    conn.close()
    rep = nsys_report.load_report(p)
    tl = rep.timeline
    names = sorted(tl.strings.get(int(i)) for i in tl.ranges.name_id)
    assert names == ["inner", "op", "outer", "se", "unclosed"]
    assert tl.wall_base_ns == 0 and any("ts-normalize" in n for n in rep.notes)
    rows = {r.name: r for r in rep.summaries["nvtx"]}
    assert rows["unclosed"].total_ns == 4000 - 100 and rows["outer"].total_ns == 800
