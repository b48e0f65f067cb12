"""Typed findings and structured fixes: JSON round-trips, merging, and what "Apply fix" changes."""

from __future__ import annotations

import json

from gpuscope.finding import Finding, Severity, evidence, merge
from gpuscope.fix import (CleanupPids, CleanupShm, SetForkserverPreload, SetNsysForkTracing, SetStartMethod, StopRun,
                          fix_from_dict)
from gpuscope.findings.fixes import describe, launch_changes
from gpuscope.nsys import diagnostics as D
from gpuscope.trace import coverage as C


def _finding(**kw) -> Finding:
    base = dict(code="fork-with-threads", title="forked with threads", fix="use spawn", severity="warning",
                pids=(12, 3), evidence=evidence({"forks": 2}, ["thread t1"], [12]), action=SetStartMethod("spawn"),
                first_seen_ns=1_700_000_000_000_000_000)
    base.update(kw)
    return Finding(**base)


def test_json_round_trip_keeps_every_typed_part():
    for action in (SetStartMethod("forkserver"), SetNsysForkTracing(False), CleanupPids((5, 6)),
                   CleanupShm(("/psm_1",)), StopRun(), None):
        f = _finding(action=action)
        data = json.loads(json.dumps(f.to_dict()))
        assert Finding.from_dict(data) == f
        assert Finding(**data) == f                    # the nsys report cache rebuilds them this way
        assert isinstance(Finding(**data).severity, Severity) and Finding(**data).action == action


def test_severity_compares_as_text_and_orders():
    f = _finding(severity="error")
    assert f.severity == "error" and f.severity is Severity.ERROR
    assert Severity.ERROR.rank > Severity.WARNING.rank > Severity.INFO.rank


def test_old_diagnostics_dicts_and_names_still_read():
    old = {"code": "nvtx-incompatible", "message": "m", "advice": "a", "severity": "error", "pids": [7]}
    f = Finding.from_dict(old)
    assert (f.title, f.fix, f.message, f.advice, f.pids) == ("m", "a", "m", "a", (7,))


def test_unknown_fix_kind_from_a_newer_gpuscope_is_no_action():
    assert fix_from_dict({"kind": "teleport"}) is None
    assert fix_from_dict(None) is None


def test_merge_keeps_first_seen_and_puts_errors_first():
    early = _finding(first_seen_ns=10, evidence=evidence({"forks": 1}, ["early"], [12]))
    later = _finding(first_seen_ns=50, evidence=evidence({"forks": 3}, [], [12]))
    err = _finding(code="died-by-signal", severity="error", first_seen_ns=99)
    out = merge([early, later, err])
    assert [f.code for f in out] == ["died-by-signal", "fork-with-threads"]
    assert out[1].first_seen_ns == 10 and out[1].evidence.number("forks") == 3   # recomputed numbers win
    assert out[1].evidence.excerpts == ("early",)                                # excerpts are kept


def test_apply_fix_uses_the_structured_action():
    assert launch_changes(SetStartMethod("forkserver")) == {"start_method": "forkserver"}
    assert launch_changes(SetNsysForkTracing(True)) == {"nsys": "on", "nsys_fork": "on"}
    assert launch_changes(CleanupPids((1,))) == {} and launch_changes(StopRun()) == {} and launch_changes(None) == {}
    assert launch_changes(SetNsysForkTracing(False)) == {"nsys_fork": "off"}
    assert describe(SetStartMethod("spawn")) == "start method → spawn"


def test_coverage_gives_its_fixes_typed():
    """Each reason nsys missed a process comes with its structured fix, made where it is decided."""
    from gpuscope.trace.coverage import _why_missing

    class Log:          # what _why_missing reads of a process's log
        def __init__(self, forked: bool, exit: dict | None = None) -> None:
            self.header, self.info, self.start_method, self.exit = {"forked": forked}, {}, "fork", exit

    assert _why_missing(Log(True), None, [])[1:] == (C.FIX_FORK, SetNsysForkTracing(True))
    assert launch_changes(_why_missing(Log(True), True, [])[2]) == {"start_method": "spawn"}
    assert _why_missing(Log(False), None, [])[1:] == (C.FIX_FLUSH, None)                   # a code change
    assert _why_missing(Log(False, {}), None, [{"code": "nvtx-incompatible", "title": "t"}])[1:] == (C.FIX_NVTX, None)
    assert launch_changes(SetForkserverPreload(("numpy", "pandas"))) == {"start_method": "forkserver",
                                                                          "forkserver_preload": "numpy,pandas"}


def test_nsys_diagnostics_are_findings_with_actions(tmp_path):
    import sqlite3
    from contextlib import closing

    path = tmp_path / "e.sqlite"
    text = "3 NVTX annotations were discarded because they contained at least one invalid string handle."
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT)")
        conn.execute("CREATE TABLE DIAGNOSTIC_EVENT(text TEXT, globalPid INT)")
        conn.executemany("INSERT INTO DIAGNOSTIC_EVENT VALUES (?, ?)",
                         [(text, -1), ("No NVTX events collected. Does the process use NVTX?", 2 << 24)])
        conn.execute("CREATE TABLE NVTX_EVENTS(eventType INT, globalTid INT)")
        conn.execute("INSERT INTO NVTX_EVENTS VALUES (59, ?)", ((1 << 24) + 1,))
        conn.execute("CREATE TABLE OSRT_API(start INT)")
        conn.commit()
    found = {f.code: f for f in D.diagnose(path)}
    assert isinstance(found["nvtx-discarded-handles"], Finding) and found["nvtx-discarded-handles"].source == "nsys"
    assert found["nvtx-discarded-handles"].action == SetNsysForkTracing(True)
    assert found["nvtx-discarded-handles"].evidence.number("annotations discarded") == 3
    assert found["nvtx-none-collected"].pids == (2,)
    assert launch_changes(found["nvtx-none-collected"].action) == {"nsys": "on", "nsys_fork": "on"}


def test_no_progress_is_not_said_once_the_program_has_ended(tmp_path):
    """Under nsys the run lasts past the program (nsys writes its report, its processes idle): the
    watchdog does not call that stuck once the main process has written its exit record (the run's
    event-log reader tells the recorder, as ``started`` wires it)."""
    from gpuscope.findings.recorder import FindingsRecorder
    from gpuscope.trace.events import RunEvents

    rec = FindingsRecorder()
    rec.run_dir = str(tmp_path)
    (tmp_path / "events").mkdir()
    log = tmp_path / "events" / "100-1.log"
    log.write_text('H\t{"role": "main", "pid": 100, "anchor_mono_ns": 1, "anchor_wall_ns": 1}\nR\t1\t2\t0\t1\n')
    events = RunEvents(tmp_path)
    events.on_first_exit(rec._main_exited.set)
    events.refresh()
    assert not rec._program_exited()
    with log.open("a") as fh:
        fh.write('X\t3\t{"exit_code": 0}\n')
    events.refresh()
    assert rec._program_exited()
