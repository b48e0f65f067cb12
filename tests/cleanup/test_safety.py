"""Safety rules, with real processes: PID 1, gpuscope itself and its ancestors, a pid whose
create time changed since the listing, and another user's process."""

from __future__ import annotations

import os
import subprocess

import pytest

from gpuscope.cleanup import Policy, ProcIdentity, act, identify, stop_process
from tests.cleanup.util import PY, cli, cli_json, state_of, wait_for


def test_pid_1_is_refused(run_env):
    res = cli(run_env, "--kill", "1", "--yes")
    assert res.returncode == 1
    assert "refusing to signal PID 1" in res.stdout


def test_gpuscope_itself_is_refused_by_the_cli(run_env):
    # `exec` keeps the shell's pid, so $$ is the pid of the gpuscope process itself.
    res = subprocess.run(["sh", "-c", f'exec "{PY}" -m gpuscope cleanup --kill $$ --yes --json'],
                         env=run_env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    assert "refusing to signal gpuscope itself (pid " in res.stdout


def test_gpuscope_itself_and_its_ancestors_are_refused_by_the_api():
    me = act(identify(os.getpid()))
    assert not me.ok and me.result == "refused"
    assert me.message == f"refusing to signal gpuscope itself (pid {os.getpid()})"
    parent = act(identify(os.getppid()))
    assert parent.message == f"refusing: pid {os.getppid()} is gpuscope's ancestor"


def test_ancestor_is_refused_by_the_cli(run_env):
    res = cli(run_env, "--kill", str(os.getpid()), "--yes")   # pytest is the CLI's parent
    assert res.returncode == 1
    assert f"refusing: pid {os.getpid()} is gpuscope's ancestor" in res.stdout


def test_changed_create_time_is_refused(reaper, run_env):
    pid = reaper("spawn", argv=["sleep", "600"], setsid=True)["pid"]
    ident = identify(pid)
    rc, out = cli_json(run_env, "--kill", str(pid), "--expect", f"{pid}:{ident.create_time - 5:.2f}",
                       "--yes")
    assert rc == 1
    msg = out["results"][0]["message"]
    assert msg == f"refusing: pid {pid} was restarted since it was listed (create time changed)"
    assert state_of(pid) == "S"
    # the same through the API, and the real identity is accepted
    stale = stop_process(ProcIdentity(pid, ident.create_time + 1), Policy())
    assert stale.result == "refused" and "create time changed" in stale.message
    rc, out = cli_json(run_env, "--expect", f"{pid}:{ident.create_time!r}", "--yes", "--force")
    assert rc == 0, out
    assert out["results"][0]["action"] == "kill" and out["results"][0]["final_state"] == "gone"


def test_gone_pid_is_reported_not_refused(reaper):
    pid = reaper("spawn", argv=["sleep", "600"], setsid=True)["pid"]
    ident = identify(pid)
    assert stop_process(ident, Policy(grace_s=1)).ok
    again = stop_process(ident, Policy(grace_s=1))
    assert again.ok and again.result == "gone" and "is gone" in again.message


@pytest.fixture
def nobody_sleeper():
    """A real process of uid 65534 (nobody), or skip where that cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as another user")
    try:
        proc = subprocess.Popen(["sleep", "600"], user=65534, group=65534)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot start a process as uid 65534: {exc}")
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_other_users_process_needs_allow_other_users(nobody_sleeper, run_env):
    pid = nobody_sleeper.pid
    assert wait_for(lambda: state_of(pid) == "S")
    rc, out = cli_json(run_env, "--kill", str(pid), "--yes")
    assert rc == 1
    msg = out["results"][0]["message"]
    assert msg.startswith(f"refusing: pid {pid} belongs to user ")
    assert msg.endswith("; run as root and pass --allow-other-users")
    assert nobody_sleeper.poll() is None
    rc, out = cli_json(run_env, "--kill", str(pid), "--yes", "--allow-other-users", "--grace", "1")
    assert rc == 0, out
    assert out["results"][0]["result"] == "done"
    assert nobody_sleeper.wait(timeout=10) == -15   # SIGTERM was enough


def test_refusals_are_logged(run_env):
    cli(run_env, "--kill", "1", "--yes")
    rc, hist = cli_json(run_env, "--history")
    row = hist["actions"][0]
    assert row["target"] == "pid 1" and row["result"] == "refused" and row["ok"] is False
    assert row["message"] == "refusing to signal PID 1"


def test_without_pidfds_the_identity_is_rechecked_before_each_kill(reaper, monkeypatch):
    """Kernels before 5.3 have no pidfd_open: the fallback path must keep the same guarantees."""
    import errno

    import gpuscope.cleanup.actions as actions

    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open not implemented")

    monkeypatch.setattr(actions.os, "pidfd_open", no_pidfd)
    pid = reaper("spawn", argv=["sleep", "600"], setsid=True)["pid"]
    assert wait_for(lambda: state_of(pid) == "S")       # asleep in sleep(1), past its exec
    ident = identify(pid)
    stale = stop_process(ProcIdentity(pid, ident.create_time + 1), Policy())
    assert stale.result == "refused" and state_of(pid) == "S"
    res = stop_process(ident, Policy(grace_s=1))
    assert res.ok and res.final_state == "gone"
