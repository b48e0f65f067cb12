"""Recording with real nsys through prepare() / finish(), as the run engine does."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest

from gpuscope.nsys import agents as procs, record
from tests.flaky import known_flake, note_retry
from tests.nsys_record.helpers import (NVTX_SCRIPT, VERSIONS, launch, make_spec, need, nvtx_rows,
                                       record_script, wait_gone)

pytestmark = pytest.mark.nsys

SLEEPER = "import nvtx, time\nwith nvtx.annotate('sleeping'):\n    time.sleep(120)\n"
FORK_POOL = """\
import multiprocessing as mp, os, time, nvtx

@nvtx.annotate("decorated_in_parent")      # registered at import, in the parent
def task(i):
    with nvtx.annotate("fresh_in_child" if i >= 0 else "fresh_in_parent"):  # first used in a worker
        time.sleep(0.05)
    return os.getpid()

if __name__ == "__main__":
    mp.set_start_method("fork")
    task(-1)
    with mp.Pool(2) as pool:
        print("workers", sorted(set(pool.map(task, range(4)))), flush=True)
"""


@pytest.fixture(scope="module", params=VERSIONS)
def recording(request, provisioned, tmp_path_factory):
    inst = need(provisioned, request.param)
    return (inst, *record_script(inst, tmp_path_factory.mktemp(f"rec{request.param}"), NVTX_SCRIPT))


def test_records_nvtx_ranges_into_rep_and_sqlite(recording):
    inst, session, result, _ = recording
    assert result.ok, result.reason
    assert result.reason is None
    assert result.rep_path == session.rep_path and result.rep_path.stat().st_size > 0
    assert result.sqlite_path == session.sqlite_path and result.sqlite_path.stat().st_size > 0
    assert result.nsys_version == inst.version and result.nsys_path == str(inst.nsys)
    names = {(t, n) for _, t, n in nvtx_rows(result.sqlite_path)}
    assert {(59, "outer"), (59, "inner"), (34, "hello")} <= names
    assert result.findings == []


def test_debian_builds_need_the_import_step_and_drop_the_qdstrm(recording):
    _, session, result, output = recording
    steps = [name for name, _ in result.steps]
    assert steps == ["profile", "import", "export"]
    assert all(sec >= 0 for _, sec in result.steps)
    assert "importer" in output.lower()        # nsys itself says it could not import
    assert result.qdstrm_path is None and not session.qdstrm_path.exists()
    assert (session.run_dir / "nsys-import.log").exists() and (session.run_dir / "nsys-export.log").exists()
    assert session.versions() == {"nsys": result.nsys_version, "nsys_path": result.nsys_path}


def test_profile_arguments(provisioned, tmp_path):
    inst = next(iter(provisioned.values()))
    (tmp_path / "s.py").write_text("pass\n")
    spawn = record.prepare(make_spec(tmp_path / "s.py", "spawn"), tmp_path, ["python", "s.py", "--x"], {"A": "1"},
                           install=inst)
    assert spawn.argv == [str(inst.nsys), "profile", "--trace=nvtx,osrt,cuda", "--sample=none", "--cpuctxsw=none",
                          "-o", str(tmp_path / "report"), "-f", "true", "python", "s.py", "--x"]
    assert spawn.env == {"A": "1"} and spawn.notes == []
    fork = record.prepare(make_spec(tmp_path / "s.py", "fork", extra_args=("--duration=5",)), tmp_path,
                          ["python", "s.py"], {}, install=inst)
    assert fork.argv[2:7] == ["--trace=nvtx,osrt,cuda", "--sample=none", "--cpuctxsw=none",
                              "--trace-fork-before-exec=true", "-o"]
    assert fork.argv[-3:] == ["--duration=5", "python", "s.py"]
    assert any("relies on undefined behavior and might cause your application to crash or deadlock" in n
               and "spawn" in n for n in fork.notes)
    default = record.prepare(make_spec(tmp_path / "s.py", "default"), tmp_path, ["p"], {}, install=inst)
    assert "--trace-fork-before-exec=true" in default.argv
    forced = record.prepare(make_spec(tmp_path / "s.py", "spawn", trace_fork=True, trace=("nvtx",)), tmp_path,
                            ["p"], {}, install=inst)
    assert "--trace-fork-before-exec=true" in forced.argv and "--trace=nvtx" in forced.argv
    off = record.prepare(make_spec(tmp_path / "s.py", "fork", trace_fork=False), tmp_path, ["p"], {}, install=inst)
    assert "--trace-fork-before-exec=true" not in off.argv and off.notes == []


def test_fork_workers_are_traced_with_the_flag(newest, tmp_path):
    session, result, output = record_script(newest, tmp_path, FORK_POOL, start_method="fork")
    assert "--trace-fork-before-exec=true" in session.argv
    assert result.ok, result.reason
    workers = {int(p) for p in output.split("workers [", 1)[1].split("]", 1)[0].split(",")}
    rows = nvtx_rows(result.sqlite_path)
    fresh = {pid for pid, t, name in rows if t == 59 and name == "fresh_in_child"}
    assert workers and fresh == workers, (workers, rows)
    parent = {pid for pid, t, name in rows if t == 59 and name == "decorated_in_parent"}
    assert len(parent) == 1 and not parent & workers
    assert {(pid, name) for pid, t, name in rows if t == 59 and pid in parent} == \
        {(p, "decorated_in_parent") for p in parent} | {(p, "fresh_in_parent") for p in parent}
    # Events that use the handle registered in the parent never show under their own name in a
    # worker: nsys 2024.2 drops them or files them under a string the worker registered itself.
    assert not {pid for pid, t, name in rows if name == "decorated_in_parent"} & workers


def test_kill_stops_a_hung_nsys_its_agent_and_the_program(provisioned, tmp_path):
    inst = need(provisioned, "2022.4") if "2022.4" in provisioned else next(iter(provisioned.values()))
    session, proc, agent, app = _sleeping_under_nsys(inst, tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)                  # "nsys hangs": the engine's timeout expires
    assert procs.alive(agent.pid) and procs.alive(app)
    shm = procs.shm_files(procs.tree({proc.pid}) | {agent.pid})
    assert shm                                  # nsys's agent / launcher use /dev/shm files
    for pid in (proc.pid, agent.pid):           # frozen: deaf to SIGTERM, like a hung nsys
        os.kill(pid, signal.SIGSTOP)
    killed = session.kill(grace_s=0.5)
    assert {proc.pid, agent.pid, app} <= set(killed)
    assert proc.wait(timeout=5) is not None
    assert wait_gone(killed) == []
    assert [p for p in shm if os.path.exists(p)] == []
    assert _live_with(str(tmp_path)) == [] and agent.pid not in [a.pid for a in procs.agents()]
    result = session.finish(timeout_s=10)
    assert not result.ok and "nsys wrote no report" in result.reason and result.sqlite_path is None


def test_interrupt_stops_the_program_and_keeps_the_report(newest, tmp_path):
    for attempt in (1, 2):
        out = tmp_path / f"attempt{attempt}"
        out.mkdir()
        (out / "sleeper.py").write_text(SLEEPER)
        spec = make_spec(out / "sleeper.py", trace=("nvtx",))
        session = record.prepare(spec, out, [spec.python, spec.script], dict(os.environ), install=newest)
        proc = launch(session, out)
        found = _wait_for_agent_and_app(proc.pid, spec.script)
        if found is None:
            pytest.fail(f"nsys started no agent or no program within 30 s; it said: "
                        f"{(out / 'output.log').read_text(errors='replace')[-2000:]!r}")
        agent, app = found
        time.sleep(0.5)                              # let the program enter its range
        assert session.interrupt()
        assert proc.wait(timeout=60) != 0            # nsys passes on the program's status (KeyboardInterrupt)
        assert wait_gone([app, agent.pid]) == []
        result = session.finish(timeout_s=60)
        flake = None if result.ok else known_flake(result.reason)
        if flake and attempt == 1:   # the importer failing on its own, as without gpuscope (tests/flaky.py)
            note_retry("nsys interrupt recording (attempt 1)", flake)
            continue
        break
    assert result.ok, result.reason
    assert (59, "sleeping") in {(t, n) for _, t, n in nvtx_rows(result.sqlite_path)}
    assert not session.interrupt()               # nothing left to interrupt


def test_agent_of_a_killed_nsys_is_stale_and_kill_still_finds_it(provisioned, tmp_path):
    inst = next(iter(provisioned.values()))
    session, proc, agent, app = _sleeping_under_nsys(inst, tmp_path, trace=("nvtx",))
    assert agent.pid not in procs.find_stale_agents()
    shm = procs.shm_files(procs.tree({proc.pid}) | {agent.pid})
    os.kill(proc.pid, signal.SIGKILL)           # only nsys itself, as a blunt timeout would
    proc.wait()
    assert agent.pid in procs.find_stale_agents() and procs.alive(app)
    killed = session.kill(grace_s=1.0)
    assert {agent.pid, app} <= set(killed) and wait_gone(killed) == []
    assert agent.pid not in procs.find_stale_agents()
    assert [p for p in shm if os.path.exists(p)] == []


def test_finish_without_a_recording_and_without_time(provisioned, tmp_path):
    inst = next(iter(provisioned.values()))
    (tmp_path / "s.py").write_text("pass\n")
    session = record.prepare(make_spec(tmp_path / "s.py"), tmp_path, ["python", "s.py"], {}, install=inst)
    lines = []
    result = session.finish(lines.append, timeout_s=5)
    assert not result.ok and result.rep_path is None and result.steps == []
    assert "nsys wrote no report (report.qdstrm and report.nsys-rep are missing)" in result.reason
    assert lines == [f"nsys: failed: {result.reason}"]
    session.qdstrm_path.write_bytes(b"not a qdstrm")
    result = session.finish(lines.append, timeout_s=0.0)
    assert not result.ok and result.reason == "no time left for the nsys import step"
    result = session.finish(lines.append, timeout_s=30)
    assert not result.ok and result.reason.startswith("nsys import step failed (exit ")
    assert "nsys: importing report.qdstrm" in lines


def test_a_step_over_its_time_is_stopped_and_can_be_redone(newest, tmp_path):
    (tmp_path / "s.py").write_text(NVTX_SCRIPT)
    spec = make_spec(tmp_path / "s.py", trace=("nvtx",))
    session = record.prepare(spec, tmp_path, [spec.python, spec.script], dict(os.environ), install=newest)
    assert launch(session, tmp_path).wait(timeout=60) == 0
    assert session.qdstrm_path.exists() and not session.rep_path.exists()
    short = session.finish(timeout_s=0.02)           # the importer needs ≈0.1 s
    for _ in range(5):   # a runner that stalled 20 ms before the step left it no time at all: again
        if short.reason != "no time left for the nsys import step":
            break
        short = session.finish(timeout_s=0.02)
    assert not short.ok and short.reason.startswith("nsys import step did not finish within 0.0")
    assert short.reason.endswith("s and was stopped") and short.sqlite_path is None
    assert _live_with(str(session.qdstrm_path)) == []  # the importer was stopped, not left running
    again = session.finish(timeout_s=60)
    assert again.ok, again.reason
    assert {(t, n) for _, t, n in nvtx_rows(again.sqlite_path)} >= {(59, "outer"), (34, "hello")}


def _sleeping_under_nsys(inst, folder, **nsys):
    """The sleeper started under nsys: (session, nsys process, its agent, the program's pid). An
    nsys that starts neither within 30 s and says why in words tests/flaky.py knows (its agent
    failing on its own, as without gpuscope) is stopped and started once more."""
    for attempt in (1, 2):
        out = folder / f"sleeper{attempt}"
        out.mkdir()
        (out / "sleeper.py").write_text(SLEEPER)
        spec = make_spec(out / "sleeper.py", **nsys)
        session = record.prepare(spec, out, [spec.python, spec.script], dict(os.environ), install=inst)
        proc = launch(session, out)
        found = _wait_for_agent_and_app(proc.pid, spec.script)
        if found is not None:
            return (session, proc, *found)
        said = (out / "output.log").read_text(errors="replace") if (out / "output.log").exists() else ""
        session.kill(grace_s=0.5)
        flake = known_flake(said)
        if flake and attempt == 1:
            note_retry("nsys start (attempt 1)", flake)
            continue
        pytest.fail(f"nsys started no agent or no program within 30 s; it said: {said[-2000:]!r}")


def _wait_for_agent_and_app(nsys_pid: int, script: str, timeout: float = 30.0):
    """(agent, the program's pid) once nsys has started both, else None after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agent = next((a for a in procs.agents() if a.profile_pid == nsys_pid), None)
        app = [p for p in _live_with(script) if p != nsys_pid and "nsys" not in _cmd(p)[0]]
        if agent and app:
            return agent, app[0]
        time.sleep(0.1)
    return None


def _cmd(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline() or [""]
    except psutil.Error:
        return [""]


def _live_with(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (checked through /proc)."""
    return [p.pid for p in psutil.process_iter() if any(text in a for a in _cmd(p.pid)) and procs.alive(p.pid)]


def test_a_failed_step_says_its_status_line(tmp_path):
    """The importer ends its error with a brace-structured dump whose last line is "}": the reason
    given is its status line, not the brace."""
    log = tmp_path / "nsys-import.log"
    log.write_text("Processing [====100%]\n\nImport Failed with unexpected exception: main.cpp(34)\n"
                   "[QuadDCommon::tag_message*] = Status: AnalysisFailed\nError {\n  Type: RuntimeError\n"
                   '  Value: "QuadDAnalysis::AnalysisHelper::AnalysisStatus::SetNextState"\n}\n')
    line = record._last_line(log)
    assert line.endswith("Status: AnalysisFailed")
    assert known_flake(line) is None   # seen only while gpuscope recorded, never with plain nsys: not retried
    log.write_text("one\ntwo words\n}\n")
    assert record._last_line(log) == "two words"
