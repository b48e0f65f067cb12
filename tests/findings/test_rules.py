"""Each rule on a real run of a script that triggers it, and clean scripts with no findings at all.

Runs go through the real CLI (`gpuscope run --json`); the rules then read the run folder, as
`gpuscope findings RUN_ID` does.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gpuscope.findings.engine import analyse_run
from tests.findings.live import SCRIPTS
from tests.runs.helpers import ROOT, gpuscope, summary

CLEAN = [ROOT / "tests/app/scripts/pool_spawn.py", ROOT / "tests/app/scripts/demo_pool.py",
         ROOT / "tests/runs/scripts/pool_nvtx.py", ROOT / "tests/runs/scripts/many_kinds.py"]


def _run(*args: str | Path, env) -> tuple[dict, list]:
    proc = gpuscope("run", "--json", "-q", *map(str, args), env=env, timeout=240)
    data = summary(proc)
    return data, analyse_run(Path(data["run_dir"]))


def _codes(findings) -> dict:
    return {f.code: f for f in findings}


@pytest.mark.parametrize("script", CLEAN, ids=lambda p: p.name)
def test_clean_scripts_have_no_findings(script, run_env):
    # pool_spawn: 3 s of work per worker, so a slow (loaded) machine's spawn start-up stays a minority.
    args = ("--start-method", "spawn", str(script), "3") if script.name == "pool_spawn.py" else (str(script),)
    data, found = _run(*args, env=run_env)
    assert data["status"] == "exited", data
    assert found == [], [f.line() for f in found]


def test_died_by_signal_names_the_children_and_their_signals(run_env):
    data, found = _run(SCRIPTS / "killed_children.py", env=run_env)
    f = _codes(found)["died-by-signal"]
    by_role = {p["pid"]: p for p in data["processes"]}
    assert len(f.pids) == 2 and all(by_role[p]["role"] == "process child" for p in f.pids)
    assert sorted(line.rsplit(" ", 1)[1] for line in f.evidence.excerpts) == ["SIGKILL", "SIGSEGV"]
    assert f.severity == "error" and "OOM killer" in f.fix
    assert set(_codes(found)) == {"died-by-signal"}             # the clean child is not in it


def test_leaked_shared_memory_names_the_segment(run_env):
    proc = gpuscope("run", "--json", "-q", str(SCRIPTS / "shm_leak.py"), env=run_env, timeout=240)
    name = proc.stdout.decode().split("created ", 1)[1].split()[0]
    found = _codes(analyse_run(Path(summary(proc)["run_dir"])))
    f = found["leaked-shm"]
    assert "1 leaked shared_memory objects" in f.evidence.excerpts[0] and f.evidence.number("objects") == 1
    # Python 3.13+ names the segments in the warning; older ones do not (then there is nothing to unlink).
    assert f.action is None or f.action.names == ("/" + name.lstrip("/"),)
    assert set(found) == {"leaked-shm"}                     # the tracker's clean-up is no leftover


def test_tasks_too_small_suggests_a_chunksize_from_the_measurements(run_env):
    _, found = _run(SCRIPTS / "tiny_tasks.py", env=run_env)
    f = _codes(found)["tasks-too-small"]
    ev = f.evidence
    assert ev.number("tasks") == 3000 and ev.number("median gap µs") >= ev.number("median task µs")
    chunk = int(ev.number("suggested chunksize"))
    assert chunk >= 2 and f"chunksize={chunk}" in f.fix
    assert "load-imbalance" not in _codes(found)


def test_load_imbalance_on_one_long_chunk(run_env):
    _, found = _run(SCRIPTS / "imbalance.py", env=run_env)
    f = _codes(found)["load-imbalance"]
    assert f.evidence.number("ratio") > 1.5 and f.evidence.number("busy max s") >= 1.0
    assert len(f.pids) == 2


def test_startup_dominated_spawn_workers(run_env):
    _, found = _run(SCRIPTS / "slow_start.py", env=run_env)
    f = _codes(found)["startup-dominated"]
    assert f.evidence.number("mean start-up s") >= 0.8 and f.evidence.number("start-up share") > 0.5
    assert f.action is not None and f.action.method == "forkserver"
    assert set(_codes(found)) == {"startup-dominated"}


def test_fork_with_threads_names_the_thread(run_env, tmp_path):
    # The thread runs but holds no lock at the fork: no deadlock, still the hazard.
    script = tmp_path / "fork_thread.py"
    script.write_text(
        "import multiprocessing as mp, threading, time\n"
        "def spin():\n    while True:\n        time.sleep(0.05)\n"
        "def f(x):\n    return x\n"
        "if __name__ == '__main__':\n"
        "    threading.Thread(target=spin, name='heartbeat', daemon=True).start()\n"
        "    with mp.get_context('fork').Pool(2) as p:\n        print(sum(p.map(f, range(4))))\n")
    data, found = _run(script, env=run_env)
    f = _codes(found)["fork-with-threads"]
    main = next(p["pid"] for p in data["processes"] if p["role"] == "main")
    assert f.pids == (main,) and f.evidence.excerpts == ("thread heartbeat (spin)",)
    assert f.evidence.number("forks with threads") == 2 and f.action.method == "spawn"
    assert signal.SIGTERM  # pool.terminate() SIGTERMs the workers: no died-by-signal for that
    assert "died-by-signal" not in _codes(found)


def test_left_running_links_to_cleanup(run_env):
    import os

    from gpuscope.finding import CleanupPids

    proc = gpuscope("run", "--json", "-q", str(SCRIPTS / "leave_running.py"), env=run_env, timeout=240)
    sleeper = int(proc.stdout.decode().split("sleeper ", 1)[1].split()[0])
    try:
        found = _codes(analyse_run(Path(summary(proc)["run_dir"])))
        f = found["left-running"]
        assert sleeper in f.pids and f.action == CleanupPids(f.pids), f
        assert "Cleanup" in f.fix
    finally:
        try:
            os.kill(sleeper, signal.SIGKILL)
        except ProcessLookupError:
            pass
