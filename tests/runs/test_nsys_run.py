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
from tests.runs.helpers import gpuscope, script, summary

pytestmark = pytest.mark.nsys


INSTALLS = locate.provisioned_installs()
# The oldest and the newest provisioned builds: the fork behaviour differs most between them.
CHOSEN = sorted(INSTALLS, key=lambda r: INSTALLS[r].version_tuple)
CHOSEN = sorted({CHOSEN[0], CHOSEN[-1]}) if CHOSEN else ["missing"]


@pytest.fixture(params=CHOSEN)
def nsys_env(request, run_env):
    if request.param == "missing":
        if os.environ.get("CI") == "true":
            pytest.fail("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
        pytest.skip("Nsight Systems is not provisioned (run scripts/provision_nsys.py)")
    return dict(run_env, GPUSCOPE_NSYS=str(INSTALLS[request.param].nsys))


def _record(env, method, *extra):
    proc = gpuscope("run", "--json", "--nsys", "--nsys-trace", "nvtx", "--start-method", method, *extra,
                    script("pool_nvtx.py"), env=env, timeout=300)
    result = summary(proc)
    assert result["status"] == "exited", (result, proc.stderr.decode()[-2000:])
    assert result["nsys"]["ok"], result["nsys"]
    report = gpuscope("report", "--json", result["run_dir"], env=env, timeout=300)
    assert report.returncode == 0, report.stderr.decode()
    return result, json.loads(report.stdout)


def _nsys_pids_with_ranges(report):
    return {p["pid"] for p in report["processes"] if p["nvtx_ranges"] > 0}


def test_spawn_three_processes_in_nsys(nsys_env):
    result, report = _record(nsys_env, "spawn")
    assert len(_nsys_pids_with_ranges(report)) == 3
    assert report["coverage"]["processes_missing"] == 0


def test_fork_without_support_loses_workers_and_is_flagged(nsys_env):
    result, report = _record(nsys_env, "fork", "--nsys-fork", "off")
    ranged = _nsys_pids_with_ranges(report)
    main = next(p["pid"] for p in result["processes"] if p["role"] == "main")
    assert ranged == {main}
    missing = [c for c in report["coverage"]["processes"] if c["status"] != "ok"]
    assert len(missing) == 2 and all(c["role"] == "pool worker" for c in missing)
    assert all("fork" in (c["reason"] or "") for c in missing), missing
    # gpuscope's own record still has all three processes' ranges, merged into the timeline
    assert {p["pid"] for p in report["processes"] if p["nvtx_ranges"] or p["gpuscope_ranges"]} >= \
        {p["pid"] for p in result["processes"] if p["ranges"]}


def test_fork_with_support_three_processes_in_nsys(nsys_env):
    result, report = _record(nsys_env, "fork")
    assert "--trace-fork-before-exec=true" in json.dumps(result) or result["notes"]
    assert len(_nsys_pids_with_ranges(report)) == 3, report["processes"]
    workers = [p for p in result["processes"] if p["role"] == "pool worker"]
    assert all(p["exit_code"] in (0, 143) for p in workers)


HANG_AT_EXIT = """
import ctypes
libc = ctypes.CDLL(None)
libc.__cxa_atexit(libc.pause, None, None)  # a C exit handler that never returns, like a stuck flush
print("bye", flush=True)
"""


def test_program_stuck_after_its_exit_handlers_is_stopped(nsys_env, tmp_path):
    """nsys 2024.2 was seen holding a finished program in its exit handlers: bounded, then stopped."""
    import time

    from gpuscope.runs import procscan

    path = tmp_path / "hang.py"
    path.write_text(HANG_AT_EXIT)
    t0 = time.monotonic()
    proc = gpuscope("run", "--json", "--nsys", "--nsys-trace", "nvtx", "--nsys-timeout", "4", str(path),
                    env=nsys_env, timeout=120)
    elapsed = time.monotonic() - t0
    result = summary(proc)
    assert result["status"] == "failed" and "hung" in result["error"], result
    assert elapsed < 60
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
    assert held.acquire(5)
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
