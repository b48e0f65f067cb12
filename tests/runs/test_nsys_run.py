"""`gpuscope run --nsys`: real Nsight Systems recordings of a Pool(2) with an @nvtx.annotate task.

spawn -> 3 processes with ranges in nsys; fork without gpuscope's fork support -> 1, flagged by
the coverage check; fork with it (--trace-fork-before-exec, re-registered NVTX strings, exit
through C exit() so nsys flushes) -> 3.
"""

from __future__ import annotations

import json
import os

import pytest

from gpuscope.nsys import locate
from tests.flaky import known_flake, note_retry
from tests.nsys_versions import BEHAVIOUR, VERSIONS
from tests.runs.helpers import gpuscope, script, summary

pytestmark = pytest.mark.nsys


INSTALLS = locate.provisioned_installs()


def _chosen(releases) -> list[str]:
    return [r for r in releases if r in INSTALLS] or ["missing"]


def _env(release: str, run_env: dict) -> dict:
    if release == "missing":
        if os.environ.get("CI") == "true":
            pytest.fail("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
        pytest.skip("Nsight Systems is not provisioned (run scripts/provision_nsys.py)")
    return dict(run_env, GPUSCOPE_NSYS=str(INSTALLS[release].nsys))


# Stop, interrupt and spawn runs: the newest release (tests/nsys_versions.py BEHAVIOUR).
@pytest.fixture(params=_chosen(BEHAVIOUR))
def nsys_env(request, run_env):
    return _env(request.param, run_env)


# Fork runs: the oldest and the newest release, whose fork behaviour differs most.
@pytest.fixture(params=_chosen(VERSIONS))
def fork_env(request, run_env):
    return _env(request.param, run_env)


def _record(env, method, *extra, program="pool_nvtx.py"):
    for attempt in (1, 2):
        proc = gpuscope("run", "--json", "--nsys", "--nsys-trace", "nvtx", "--start-method", method, *extra,
                        script(program), env=env, timeout=300)
        result = summary(proc)
        flake = None if result["status"] == "exited" else known_flake(proc.stderr.decode(errors="replace"))
        if flake and attempt == 1:      # nsys failing on its own, as it does without gpuscope (tests/flaky.py)
            note_retry(f"gpuscope run --nsys {method} (attempt 1)", flake)
            continue
        break
    assert result["status"] == "exited", (result, proc.stderr.decode()[-2000:])
    assert result["nsys"]["ok"], result["nsys"]
    report = gpuscope("report", "--json", result["run_dir"], env=env, timeout=300)
    assert report.returncode == 0, report.stderr.decode()
    return result, json.loads(report.stdout)


def _nsys_argv(result) -> list[str]:
    """The command line gpuscope launched the run with (``nsys profile ... python script``), from spec.json."""
    with open(os.path.join(result["run_dir"], "spec.json"), encoding="utf-8") as fh:
        return json.load(fh)["argv"]


def _nsys_pids_with_ranges(report):
    return {p["pid"] for p in report["processes"] if p["nvtx_ranges"] > 0}


def test_spawn_three_processes_in_nsys(nsys_env):
    result, report = _record(nsys_env, "spawn")
    assert len(_nsys_pids_with_ranges(report)) == 3
    assert report["coverage"]["processes_missing"] == 0


def test_pool_task_ranges_reach_nsys_from_a_program_that_never_imports_nvtx(nsys_env):
    """gpuscope imports nvtx for its own ranges (pool tasks) only where a tool receives them: under
    nsys (NVTX_INJECTION64_PATH) every worker that ran a task has its ranges in the report."""
    result, report = _record(nsys_env, "spawn", program="pool_no_nvtx.py")
    tasked = {p["pid"] for p in result["processes"] if p["role"] == "pool worker" and p["ranges"]}
    assert tasked and _nsys_pids_with_ranges(report) == tasked, report["processes"]


def test_fork_without_support_loses_workers_and_is_flagged(fork_env):
    nsys_env = fork_env
    result, report = _record(nsys_env, "fork", "--nsys-fork", "off")
    assert not [a for a in _nsys_argv(result) if a.startswith("--trace-fork-before-exec")], _nsys_argv(result)
    ranged = _nsys_pids_with_ranges(report)
    main = next(p["pid"] for p in result["processes"] if p["role"] == "main")
    assert ranged == {main}
    missing = [c for c in report["coverage"]["processes"] if c["status"] != "ok"]
    assert len(missing) == 2 and all(c["role"] == "pool worker" for c in missing)
    assert all("fork" in (c["reason"] or "") for c in missing), missing
    # gpuscope's own record still has all three processes' ranges, merged into the timeline
    assert {p["pid"] for p in report["processes"] if p["nvtx_ranges"] or p["gpuscope_ranges"]} >= \
        {p["pid"] for p in result["processes"] if p["ranges"]}


def test_fork_with_support_three_processes_in_nsys(fork_env):
    nsys_env = fork_env
    result, report = _record(nsys_env, "fork")
    assert "--trace-fork-before-exec=true" in _nsys_argv(result), _nsys_argv(result)   # what nsys was started with
    assert any(n.startswith("nsys traces fork children before exec") for n in result["notes"]), result["notes"]
    assert len(_nsys_pids_with_ranges(report)) == 3, report["processes"]
    workers = [p for p in result["processes"] if p["role"] == "pool worker"]
    assert all(p["exit_code"] in (0, 143) for p in workers), \
        [(p["pid"], p["exit_code"], p.get("exit_source"), p.get("exit_how")) for p in workers]


HANG_AT_EXIT = """
import ctypes
libc = ctypes.CDLL(None)
libc.__cxa_atexit(libc.pause, None, None)  # a C exit handler that never returns, like a stuck flush
print("bye", flush=True)
"""


def test_program_stuck_after_its_exit_handlers_is_stopped(nsys_env, tmp_path):
    """nsys 2024.2 was seen holding a finished program in its exit handlers: bounded, then stopped."""
    from gpuscope.procs import read as procscan

    path = tmp_path / "hang.py"
    path.write_text(HANG_AT_EXIT)
    # bounded: gpuscope returns (the program alone would never end; the timeout is a generous limit)
    proc = gpuscope("run", "--json", "--nsys", "--nsys-trace", "nvtx", "--nsys-timeout", "4", str(path),
                    env=nsys_env, timeout=180)
    result = summary(proc)
    assert result["status"] == "failed" and "hung" in result["error"], result
    assert proc.stdout.startswith(b"bye\n")
    for p in result["processes"]:
        assert not procscan.alive(p["pid"]), p


def test_stop_while_waiting_for_the_nsys_lock(nsys_env, monkeypatch):
    """Another recording holds the machine's nsys lock; Stop ends the wait, recorded as stopped."""
    import threading

    from gpuscope.errors import UserError
    from gpuscope.nsys.lock import NsysLock
    from gpuscope.runs.supervisor import Run
    from gpuscope.spec import NsysOptions, RunSpec
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    monkeypatch.setenv("GPUSCOPE_NSYS", nsys_env["GPUSCOPE_NSYS"])
    held = NsysLock()
    assert held.acquire(240)   # another recording on this machine (a test elsewhere) goes first
    try:
        run = Run(RunSpec(script=script("pool_nvtx.py"), nsys=NsysOptions(enabled=True, trace=("nvtx",))))
        messages = []
        run.progress = messages.append
        threading.Timer(0.5, run.stop).start()
        with pytest.raises(UserError, match="stopped while waiting"):
            run.start()
    finally:
        held.release()
    assert any("another nsys recording" in m for m in messages)
    with db.connect() as conn:
        assert store_runs.get_run(conn, run.run_id).status == "stopped"


# -- stopping a recording (issue 15.1 and 15.7) ------------------------------------------------------

def _start_long_recording(env, program="long_nvtx_pool.py"):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "gpuscope", "run", "--json", "--nsys", "--nsys-trace", "nvtx",
                             "--start-method", "spawn", script(program)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _until_round(proc, n):
    while True:
        line = proc.stdout.readline()
        assert line, "the program ended before it was stopped"
        if line.startswith(f"round {n}".encode()):
            return


def _nothing_of_the_run_left(run_dir):
    """No nsys, agent, importer or program process that names the run folder is alive."""
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "cmdline", "environ"]):
        try:
            text = " ".join(p.info["cmdline"] or []) + " ".join((p.info["environ"] or {}).values())
        except (TypeError, psutil.Error):
            continue
        if str(run_dir) in text and p.status() != psutil.STATUS_ZOMBIE:
            left.append((p.pid, p.info["cmdline"]))
    return left


def test_stop_keeps_the_nsys_report(nsys_env):
    """Ctrl-C after a few rounds: the program ends, nsys writes its report, gpuscope imports and
    exports it; the ranges recorded until then are in it."""
    import signal

    proc = _start_long_recording(nsys_env)
    _until_round(proc, 3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err.decode()[-3000:]
    result = json.loads(out.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    assert result["status"] == "stopped"
    assert result["nsys"]["ok"], (result["nsys"], err.decode()[-3000:])
    assert os.path.exists(result["nsys"]["sqlite_path"])
    report = gpuscope("report", "--json", result["run_dir"], env=nsys_env, timeout=300)
    assert report.returncode == 0, report.stderr.decode()
    counted = sum(p["nvtx_ranges"] for p in json.loads(report.stdout)["processes"])
    assert counted >= 4, counted  # at least the 'round' ranges of rounds 0-3, in nsys's own data
    assert not _nothing_of_the_run_left(result["run_dir"])


def test_second_stop_abandons_the_report_and_says_so(nsys_env):
    import signal
    import time

    # a program that takes 2 s to stop after SIGINT: the second Stop comes while it still runs
    proc = _start_long_recording(nsys_env, "slow_to_stop.py")
    _until_round(proc, 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err.decode()[-3000:]
    result = json.loads(out.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    assert result["status"] == "stopped"
    assert "abandoned" in (result["error"] or ""), result
    assert any("abandoned" in n for n in result["notes"])
    assert not _nothing_of_the_run_left(result["run_dir"])


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_interrupt_during_the_import_keeps_the_recording(nsys_env, sig):
    """gpuscope is signalled while QdstrmImporter runs: the importer is ended, nothing is left
    running, the run is stopped and report.qdstrm is kept."""
    import signal
    import threading
    import time

    import psutil

    proc = _start_long_recording(nsys_env)
    _until_round(proc, 1)
    seen = {}

    def watch():
        # gpuscope's own children only (a few, read from /proc/<pid>/task/*/children): a listing of
        # every process took longer under load than a small report's importer lives
        deadline = time.monotonic() + 240
        gpuscope_proc = psutil.Process(proc.pid)
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                children = gpuscope_proc.children()
            except psutil.Error:
                return
            for p in children:
                try:
                    name, cmdline = p.name(), p.cmdline()
                except psutil.Error:
                    continue
                if "QdstrmImporter" in name and any("long_nvtx" not in a and a.endswith("report.qdstrm")
                                                    for a in cmdline):
                    seen["importer"] = p.pid
                    # Hold the importer where it is: on a fast machine it ends within milliseconds,
                    # before gpuscope has handled the signal. gpuscope must end it all the same.
                    os.kill(p.pid, signal.SIGSTOP)
                    proc.send_signal(getattr(signal, sig))
                    return
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    proc.send_signal(signal.SIGINT)  # first stop: the program ends, nsys writes the report
    out, err = proc.communicate(timeout=300)
    watcher.join()
    assert "importer" in seen, err.decode()[-3000:]
    assert proc.returncode == 130, err.decode()[-3000:]
    result = json.loads(out.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    assert result["status"] == "stopped"
    assert not result["nsys"]["ok"] and "stopped during the nsys import step" in result["nsys"]["reason"]
    assert "kept report.qdstrm" in result["nsys"]["reason"]
    assert os.path.exists(os.path.join(result["run_dir"], "report.qdstrm"))
    assert not psutil.pid_exists(seen["importer"]) or psutil.Process(seen["importer"]).status() == "zombie"
    assert not _nothing_of_the_run_left(result["run_dir"])
