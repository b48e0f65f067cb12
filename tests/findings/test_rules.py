"""Each rule on a real run of a script that triggers it, and clean scripts with no findings at all.

Runs go through the real CLI (`gpuscope run --json`); the rules then read the run folder, as
`gpuscope findings RUN_ID` does.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.fix import CleanupShm
from gpuscope.findings.engine import analyse_run
from gpuscope.findings.output_rules import OutputScanner
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
    # Python 3.13+ names the segments in the warning (then the fix unlinks them); older ones do not
    if sys.version_info >= (3, 13):
        assert f.action == CleanupShm(("/" + name.lstrip("/"),)), f.action
    else:
        assert f.action is None and "/" + name.lstrip("/") not in f.title
    assert set(found) == {"leaked-shm"}                     # the tracker's clean-up is no leftover


def _python313() -> str | None:
    """A CPython 3.13+ interpreter on this machine (PATH, then pyenv's versions), or None."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = sorted(glob.glob(f"{root}/versions/3.1[3-9]*/bin/python3"))
    candidates += [p for p in (shutil.which("python3.13"), shutil.which("python3.14")) if p]
    for python in candidates:     # a pyenv shim of a version not selected fails: try the next
        probe = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 13))"],
                               capture_output=True, text=True, timeout=60)
        if probe.stdout.strip() == "True":
            return python
    return None


def test_leaked_shm_names_the_segments_python_313_prints(tmp_path):
    """The 3.13 path of the rule: the real resource tracker's warning of a 3.13 interpreter, read
    whole by the scanner (the test's own Python may be older)."""
    python = _python313()
    if python is None:    # no such interpreter here: its warning as resource_tracker.py 3.13 formats it
        err = ("UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up "
               "at shutdown: {'/psm_x1'}\n")
        name = "psm_x1"
    else:
        proc = subprocess.run([python, str(SCRIPTS / "shm_leak.py")], capture_output=True, timeout=120,
                              cwd=str(tmp_path))
        name = proc.stdout.decode().split("created ", 1)[1].split()[0]
        err = proc.stderr.decode()
    scanner = OutputScanner()
    scanner.feed(err.encode())
    scanner.finish()
    (f,) = [f for f in scanner.findings() if f.code == "leaked-shm"]
    assert f.action == CleanupShm(("/" + name.lstrip("/"),)), (err, f)
    assert name in f.title


def test_leaked_semaphore_from_the_trackers_warning(run_env):
    data, found = _run(SCRIPTS / "sem_leak.py", env=run_env)
    f = _codes(found)["leaked-semaphore"]
    assert "1 leaked semaphore objects" in f.evidence.excerpts[0] and f.evidence.number("objects") == 1
    assert f.action is None and data["status"] == "exited"


def test_executor_worker_killed_from_the_broken_pool_message(run_env):
    data, found = _run(SCRIPTS / "executor_killed.py", env=run_env)
    told = [f for f in found if f.code == "died-by-signal" and "ProcessPoolExecutor" in f.title]
    assert len(told) == 1 and "terminated abruptly" in told[0].evidence.excerpts[-1], [f.line() for f in found]
    assert told[0].severity == "error" and data["status"] == "failed"


def test_torchrun_exitcode_lines_name_the_killed_rank(run_env):
    """torchrun starts its ranks with subprocess (no multiprocessing reaping to see): the rank's
    death is known from torchrun's failure block, "exitcode  : -9 (pid: N)"."""
    proc = gpuscope("run", "--json", "-q", "--launcher", "torchrun", "--nproc", "2",
                    str(SCRIPTS / "torchrun_killed.py"), env=run_env, timeout=240)
    data = summary(proc)
    killed = next(p["pid"] for p in data["processes"] if p["role"] == "rank 1")
    found = _codes(analyse_run(Path(data["run_dir"])))
    f = found["died-by-signal"]
    assert killed in f.pids and f"pid {killed} (rank 1): SIGKILL" in f.evidence.excerpts, f


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
    # the with-block's pool.terminate() may SIGTERM the workers: no died-by-signal for that (below)
    assert "died-by-signal" not in _codes(found)


def test_sigterm_and_sigint_of_children_are_no_finding_sigkill_is():
    """What multiprocessing reports for a child pool.terminate() ended (-SIGTERM), a Ctrl-C (-SIGINT),
    and one the OOM killer ended (-SIGKILL), as the rule reads it."""
    from gpuscope.findings.process_rules import ProcessFacts, died_by_signal

    roles = {10: "pool worker", 11: "pool worker", 12: "pool worker"}
    quiet = ProcessFacts(child_exits={10: -int(signal.SIGTERM), 11: -int(signal.SIGINT)})
    assert died_by_signal(quiet, roles, stopped=False) == []
    killed = ProcessFacts(child_exits={10: -int(signal.SIGTERM), 12: -int(signal.SIGKILL)})
    (f,) = died_by_signal(killed, roles, stopped=False)
    assert f.pids == (12,) and f.evidence.excerpts == ("pid 12 (pool worker): SIGKILL",)
    assert died_by_signal(killed, roles, stopped=True) == []        # a stop's SIGKILL is gpuscope's own


def test_left_running_links_to_cleanup(run_env):
    from gpuscope.fix import CleanupPids

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
