"""The end of a run reads small event logs without numpy (issue 14.4): the pure-Python path and the
numpy path give the same ranges, process rows and findings on the same logs.

Each log is read twice: once as a short run's summary reads it (pure Python: ``range_*`` on a log
of at most ``SMALL_LOG_RANGES`` ranges) and once with the threshold below every log (numpy), and
everything the end of a run computes from it is compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuscope.findings import ipc_rules, pool_rules
from gpuscope.inject.eventlog import pack_ranges
from gpuscope.trace import events as ev
from gpuscope.trace import process_events
from gpuscope.trace.process_rows import row_from_events
from gpuscope.runs.annotate_notes import _calls
from tests.runs.helpers import gpuscope, summary
from tests.fresh_python import fresh_json

MS = 1_000_000


def _header(pid: int, ppid: int, role: str, start: int, **extra) -> bytes:
    head = {"pid": pid, "ppid": ppid, "anchor_mono_ns": start, "anchor_wall_ns": 10 * start, "role": role,
            "start_method": "spawn", **extra}
    return b"H\t" + json.dumps(head).encode() + b"\n"


def _write(folder: Path, pid: int, start: int, text: bytes, blocks: list[list[tuple]], tail: bytes = b"") -> None:
    (folder / f"{pid}-{start}.log").write_bytes(text)
    (folder / f"{pid}-{start}.ranges").write_bytes(b"".join(pack_ranges(b) for b in blocks) + tail)


def _worker(folder: Path, pid: int, start: int, tasks: list[tuple[int, int]], *, first_ns: int,
            end_ns: int | None, text_rows: int = 3) -> None:
    """A pool worker: task ranges (some as text R lines, the rest in two binary blocks, out of order
    as ranges close), one NVTX range name besides the task name, a NUL style, a cut last block."""
    rows = [(first_ns + a, first_ns + b, 7, 1 if i % 5 == 4 else 0, "P" if i % 7 else "\0")
            for i, (a, b) in enumerate(tasks)]
    text = [_header(pid, 100, "pool worker", start),
            b"S\t0\ttask\tgpuscope\twork\t\n", b"S\t1\tnvtx\t\tstep\t#ff0000\n"]
    text += [b"R\t%d\t%d\t%d\t%d\tPx\n" % r[:4] for r in rows[:text_rows]]
    if end_ns is not None:
        text.append(b'X\t%d\t{"exit_code": 0, "how": "atexit"}\n' % end_ns)
    binary = rows[text_rows:]
    half = len(binary) // 2
    blocks = [list(reversed(binary[:half])), binary[half:]] if binary else []
    _write(folder, pid, start, b"".join(text), [b for b in blocks if b], tail=b"GSR1\x05\x00\x00\x00abc")


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    events = tmp_path / "events"
    events.mkdir()
    _write(events, 100, 1_000, _header(100, 1, "main", 1_000) + b"S\t0\tnvtx\t\tmain\t\n"
           + b'I\t2000\t{"pickled": {"bytes": 300000000, "calls": 900, "max_bytes": 60000000, "seconds": 1.5}}\n'
           + b'X\t9000000000\t{"exit_code": 0}\n', [[(2_000, 5_000, 1, 0, "P")]])
    # tasks too small: 2 workers x 150 tasks of 10-11 us with ~40 us between them
    for k, pid in enumerate((101, 102)):
        tasks = [(i * 50_000 + k, i * 50_000 + k + 10_000 + (i * 37 + k) % 1_001) for i in range(150)]
        _worker(events, pid, 2_000 + k, tasks, first_ns=3_000, end_ns=9 * 10**8)
    # a second pool (another parent): imbalanced and start-up dominated, one worker without a task
    group = tmp_path / "group"
    group.mkdir()
    _worker(group, 201, 1_000, [(0, 900 * MS)], first_ns=800 * MS, end_ns=1_800 * MS, text_rows=0)
    _worker(group, 202, 1_001, [(0, 100 * MS), (150 * MS, 250 * MS)], first_ns=900 * MS,
            end_ns=None, text_rows=1)
    (group / "203-1002.log").write_bytes(_header(203, 100, "pool worker", 1_002) + b'X\t1700000000\t{}\n')
    for f in group.iterdir():
        text = f.read_bytes().replace(b'"ppid": 100', b'"ppid": 200')
        f.with_name(f.name).write_bytes(text)
        f.rename(events / f.name)
    # a fork child that exec'd a new interpreter: two logs of one process, ranges in both
    _write(events, 300, 5_000, _header(300, 100, "fork child", 5_000, forked=True)
           + b"S\t0\tnvtx\t\tbefore\t\n", [[(5_100, 5_200, 3, 0, "P"), (5_050, 5_300, 3, 0, "S")]])
    _write(events, 300, 6_000, _header(300, 100, "subprocess", 6_000) + b"S\t0\tfunc\t\tafter\t\n"
           + b"S\t1\tfunc\t\tmod:f\t\n" + b'X\t7000\t{"exit_code": 0}\n',
           [[(6_100, 6_200, 3, 0, "P"), (6_050, 6_400, 3, 1, "P")]])
    return tmp_path


def _python(run: Path) -> list[ev.ProcessEvents]:
    logs = ev.read_run_events(run)
    assert all(pe._array is None for pe in logs)   # nothing read into numpy
    return logs


def _numpy(run: Path, monkeypatch: pytest.MonkeyPatch) -> list[ev.ProcessEvents]:
    with monkeypatch.context() as m:
        m.setattr(process_events, "SMALL_LOG_RANGES", -1)
        logs = ev.read_run_events(run)
        for pe in logs:
            pe.range_end(), pe.range_totals()   # the numpy path: each helper makes the array
            assert pe._array is not None or not pe.range_count
    return logs


def _as_lists(times):
    return tuple(list(map(int, x)) for x in times)


def _stats(w: pool_rules.Worker) -> tuple:
    timed = len(w.t0) > 0
    return (w.pid, w.ppid, w.start_method, w.start_ns, w.end_ns, len(w.t0), w.busy_s,
            pool_rules._first(w.t0) if timed else None, pool_rules._last(w.t1) if timed else None)


def _group_stats(group: list[pool_rules.Worker]) -> tuple:
    durations = pool_rules._concat([pool_rules._spans(w.t0, w.t1) for w in group])
    gaps = pool_rules._concat([pool_rules._gaps(w.t0, w.t1) for w in group if len(w.t0) > 1])
    return (pool_rules._median(durations) if len(durations) else None,
            pool_rules._median(gaps) if len(gaps) else None,
            pool_rules._total(durations), pool_rules._total(gaps))


def _pool_findings(events: list[ev.ProcessEvents]) -> list:
    """The three pool rules over each pool, as the registry's declarations call them."""
    out = []
    for _, group in sorted(pool_rules.workers(events).items()):
        busy = [w for w in group if len(w.t0)]
        if busy:
            small = pool_rules.tasks_too_small(busy)
            found = (small, None if small else pool_rules.load_imbalance(busy), pool_rules.startup_dominated(group))
            out += [f for f in found if f is not None]
    return out


def _compare(a: list[ev.ProcessEvents], b: list[ev.ProcessEvents]) -> None:
    assert [pe.pid for pe in a] == [pe.pid for pe in b]
    for x, y in zip(a, b):
        assert x.range_count == y.range_count
        assert x.range_rows() == y.range_rows()
        assert x.range_end() == y.range_end()
        assert x.range_totals() == y.range_totals()
        assert x.range_names() == y.range_names() and x.top_ranges(3) == y.top_ranges(3)
        tasks = [nid for nid, n in x.names.items() if n.kind == "task"]
        assert _as_lists(x.range_times()) == _as_lists(y.range_times())
        assert _as_lists(x.range_times(tasks)) == _as_lists(y.range_times(tasks))
        assert row_from_events(x).to_dict() == row_from_events(y).to_dict()
        assert _calls(x, {"after", "mod:f"}) == _calls(y, {"after", "mod:f"})
        assert np.array_equal(np.array(x.range_rows(), dtype=ev.RANGE_DTYPE), y.ranges)
    assert ipc_rules._tasks(a) == ipc_rules._tasks(b)
    # the pool rules' numbers before any rounding, exactly
    ga, gb = pool_rules.workers(a), pool_rules.workers(b)
    assert sorted(ga) == sorted(gb)
    for parent in ga:
        assert [_stats(w) for w in ga[parent]] == [_stats(w) for w in gb[parent]]
        assert _group_stats(ga[parent]) == _group_stats(gb[parent])
    assert [f.to_dict() for f in _pool_findings(a)] == [f.to_dict() for f in _pool_findings(b)]
    assert [f.to_dict() for f in ipc_rules.large_pickles(a)] == [f.to_dict() for f in ipc_rules.large_pickles(b)]


def test_small_and_numpy_paths_agree_on_the_same_logs(run_dir, monkeypatch):
    small, big = _python(run_dir), _numpy(run_dir, monkeypatch)
    _compare(small, big)
    # the logs exercise what the comparison is about: every pool rule fires, exec'd logs merged
    codes = sorted(f.code for f in _pool_findings(small))
    assert codes == ["load-imbalance", "startup-dominated", "tasks-too-small"], codes
    (exec_child,) = [pe for pe in small if pe.pid == 300]
    assert exec_child.pre_exec is not None and exec_child.range_count == 4
    assert [r[0] for r in exec_child.range_rows()] == [5_050, 5_100, 6_050, 6_100]
    worker = next(pe for pe in small if pe.pid == 101)
    assert worker.truncated and worker.range_count == 150 and b"" in {r[4] for r in worker.range_rows()}
    assert ipc_rules._tasks(small) == 2 * 120 + 1 + 2
    # and the array made from the raw parts (the report's path) is the one the rows describe
    fresh = ev.read_run_events(run_dir)
    for pe, other in zip(fresh, small):
        assert pe.ranges.tolist() == other.range_rows()


def test_the_small_path_imports_no_numpy(run_dir):
    code = ("import sys\n"
            "from gpuscope.trace.events import read_run_events\n"
            "from gpuscope.trace.process_rows import build_rows\n"
            "from gpuscope.findings import engine\n"
            f"run = {str(run_dir)!r}\n"
            "rows = build_rows(run)\n"
            "found = engine.analyse_events(run)\n"
            "import json\n"
            "print(json.dumps([len(rows), sorted(f.code for f in found), 'numpy' in sys.modules]))\n")
    count, codes, numpy_loaded = fresh_json(code)
    assert count == 7 and {"tasks-too-small", "load-imbalance", "large-pickles"} <= set(codes), codes
    assert numpy_loaded is False


def test_a_real_pool_run_reads_the_same_both_ways(run_env, tmp_path, monkeypatch):
    script = tmp_path / "pool.py"
    script.write_text("import multiprocessing as mp, nvtx\n"
                      "@nvtx.annotate('sq')\n"
                      "def sq(x):\n    return x * x\n"
                      "if __name__ == '__main__':\n"
                      "    with mp.get_context('spawn').Pool(2) as p:\n"
                      "        print(sum(p.map(sq, range(300), chunksize=1)))\n")
    proc = gpuscope("run", "--quiet", "--json", str(script), env=run_env)
    assert proc.returncode == 0, proc.stderr
    run = Path(summary(proc)["run_dir"])
    small, big = _python(run), _numpy(run, monkeypatch)
    assert sum(pe.range_count for pe in small) >= 600      # 300 tasks and 300 'sq' ranges
    _compare(small, big)
    # what the run stored is what both paths give
    stored = {p["pid"]: p["ranges"] for p in summary(proc)["processes"]}
    assert {pe.pid: stored[pe.pid] for pe in small} == {pe.pid: pe.range_count for pe in small}


def _same(a: list[ev.ProcessEvents], b: list[ev.ProcessEvents]) -> None:
    assert [(pe.pid, pe.role, pe.start_ns, pe.range_count, pe.exit, pe.info) for pe in a] == \
           [(pe.pid, pe.role, pe.start_ns, pe.range_count, pe.exit, pe.info) for pe in b]


def test_the_run_reader_reads_only_what_the_logs_gained(run_dir):
    """``RunEvents.refresh`` (when the main process ended, while the resource tracker ends, and
    again at the end) reads only what each file gained since: what it gives after the files grew
    is what a fresh read gives, and the identity records come once each, in the order read."""
    events = run_dir / "events"
    reader = ev.RunEvents(run_dir)
    assert reader.refresh()
    first = {pe.pid: pe for pe in reader.processes()}
    cursor, records = reader.records_since(0)
    assert {pid for pid, kind, _, _ in records if kind == "H"} == set(first)
    read_before = reader.bytes_read
    assert not reader.refresh() and reader.bytes_read == read_before     # nothing new: nothing read
    with open(events / "101-2000.log", "ab") as fh:       # written after it was read
        fh.write(b'I\t9\t{"late": 1}\n')
    with open(events / "202-1001.log", "ab") as fh:       # a process still ending: its X line, in two writes
        fh.write(b'X\t1900000000\t{"exit_co')
    with open(events / "100-1000.ranges", "ab") as fh:    # its ranges file grew
        fh.write(pack_ranges([(6_000, 7_000, 0, 0, "P")]))
    assert reader.refresh()
    now = {pe.pid: pe for pe in reader.processes()}
    assert now[202].exit is None and now[202].truncated          # half a line: not read as a record yet
    with open(events / "202-1001.log", "ab") as fh:
        fh.write(b'de": 0}\n')
    reader.refresh()
    _same(reader.processes(), ev.read_run_events(run_dir))
    now = {pe.pid: pe for pe in reader.processes()}
    assert now[101].info["late"] == 1 and "late" not in first[101].info
    assert now[202].exit == {"exit_code": 0}
    assert now[202].truncated == ev.read_log(events / "202-1001.log").truncated
    assert now[100].range_count == first[100].range_count + 1
    _, new = reader.records_since(cursor)
    assert [(pid, kind) for pid, kind, _, _ in new] == [(101, "I"), (202, "X")]


def test_the_run_reader_reads_a_range_block_once_it_is_whole(run_dir):
    """A ``.ranges`` block read while it is being written waits for its end (no range lost or doubled)."""
    block = pack_ranges([(8_000, 9_000, 0, 0, "P"), (8_500, 8_700, 0, 0, "P")])
    reader = ev.RunEvents(run_dir)
    reader.refresh()
    before = {pe.pid: pe.range_count for pe in reader.processes()}
    with open(run_dir / "events" / "100-1000.ranges", "ab") as fh:
        fh.write(block[:30])
    reader.refresh()
    assert {pe.pid: pe.range_count for pe in reader.processes()}[100] == before[100]
    with open(run_dir / "events" / "100-1000.ranges", "ab") as fh:
        fh.write(block[30:])
    reader.refresh()
    after = {pe.pid: pe for pe in reader.processes()}
    assert after[100].range_count == before[100] + 2 and not after[100].truncated
    assert after[100].range_rows() == ev.read_log(run_dir / "events" / "100-1000.log").range_rows()


@pytest.mark.parametrize("header", [b'H\t{"ppid": 1, "anchor_mono_ns": 5, "anchor_wall_ns": 5}\n',
                                    b'H\t{"pid": 9, "anchor_mono_ms": 5, "anchor_wall_ns": 5}\n',
                                    b'H\t{"pid": "9", "anchor_mono_ns": 5, "anchor_wall_ns": 5}\n',
                                    b'H\t[9]\n'])
def test_a_header_that_names_no_process_is_no_log(run_dir, header):
    """A damaged header (a key or type lost) is skipped like a file without one, never a KeyError."""
    bad = run_dir / "events" / "9-5.log"
    bad.write_bytes(header + b'X\t6\t{"exit_code": 0}\n')
    assert ev.read_log(bad) is None
    assert 9 not in {pe.pid for pe in ev.read_run_events(run_dir)}
