"""``gpuscope --host H COMMAND ...`` over a real sshd as a second user: a run there as that user,
its history and report read from here, exit codes and stderr relayed, Ctrl-C stopping it, and the
ssh client killed mid-run while the run goes on there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil
import pytest

from tests.conftest import ROOT
from tests.remote.test_ssh import assert_one_line, gpuscope, leftovers

pytestmark = pytest.mark.timeout(240)


class Streaming:
    """A ``gpuscope`` process whose stdout and stderr are read as they come."""

    def __init__(self, *argv: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gpuscope", *argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(pipe, into), daemon=True)
                        for pipe, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.readers:
            t.start()

    @staticmethod
    def _read(pipe, into: list[str]) -> None:
        for line in pipe:
            into.append(line)

    def wait_for(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.out):
            assert time.monotonic() < deadline and self.proc.poll() is None, (self.out, self.err)
            time.sleep(0.05)

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        for t in self.readers:
            t.join(10)
        return code

    def kill(self) -> None:
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            child.kill()
        self.proc.kill()
        self.finish()


def remote_runs(host: str, script: str) -> list[dict]:
    proc = gpuscope("--host", host, "history", "--json")
    assert proc.returncode == 0, proc
    return [row for row in json.loads(proc.stdout) if row.get("script") == script]


def test_run_there_as_its_user_and_read_it_from_here(sshd, remote_host):
    script = sshd.script(f"uid_{uuid.uuid4().hex[:8]}.py", "import os\nprint('uid', os.getuid(), flush=True)\n")
    proc = gpuscope("--host", remote_host, "run", "--json", str(script))
    assert proc.returncode == 0, proc
    assert f"uid {sshd.user.pw_uid}\n" in proc.stdout    # the remote user's uid, not root's
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["run_dir"].startswith(f"{sshd.user.pw_dir}/.local/share/gpuscope/runs/")
    assert os.stat(record["run_dir"]).st_uid == sshd.user.pw_uid
    (row,) = remote_runs(remote_host, str(script))
    assert row["id"] == record["run_id"] and row["exit_code"] == 0
    report = gpuscope("--host", remote_host, "report", record["run_id"], "--json")
    assert report.returncode == 0 and json.loads(report.stdout)["path"] == record["run_dir"], report
    local = gpuscope("history", "--json")
    assert local.returncode == 0 and record["run_id"] not in local.stdout
    assert leftovers(sshd) == []


def test_exit_code_and_stderr_come_back(sshd, remote_host):
    script = sshd.script(f"fails_{uuid.uuid4().hex[:8]}.py",
                         "import sys\nprint('to stderr', file=sys.stderr)\nsys.exit(5)\n")
    proc = gpuscope("--host", remote_host, "run", str(script))
    assert proc.returncode == 5, proc
    assert "to stderr" in proc.stderr
    missing = gpuscope("--host", remote_host, "report", "no-such-run")
    assert_one_line(missing, "no-such-run")


def test_ctrl_c_stops_the_remote_run(sshd, remote_host):
    script = sshd.script(f"ticks_{uuid.uuid4().hex[:8]}.py",
                         "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n")
    run = Streaming("--host", remote_host, "run", str(script))
    try:
        run.wait_for("tick 3")
        run.proc.send_signal(signal.SIGINT)
        code = run.finish()
    finally:
        if run.proc.poll() is None:
            run.kill()
    assert code != 0 and "stopping the command" in "".join(run.err)
    (row,) = remote_runs(remote_host, str(script))
    assert row["status"] != "running" and row["ended_ns"], row
    assert not any("tick 599" in line for line in run.out)
    _until(lambda: leftovers(sshd) == [], "the remote run's processes end")


def test_killed_ssh_client_leaves_the_run_going(sshd, remote_host):
    script = sshd.script(f"slow_{uuid.uuid4().hex[:8]}.py",
                         "import sys, time\nprint('first line', flush=True)\ntime.sleep(4)\n"
                         "print('last line', flush=True)\nsys.exit(7)\n")
    run = Streaming("--host", remote_host, "run", str(script))
    try:
        run.wait_for("first line")
        (ssh_client,) = [p for p in psutil.Process(run.proc.pid).children() if p.name() == "ssh"]
        ssh_client.kill()
        code = run.finish()
    finally:
        if run.proc.poll() is None:
            run.kill()
    assert code == 255
    errors = [ln for ln in run.err if ln.startswith("gpuscope: error:")]
    assert len(errors) == 1 and "lost" in errors[0] and f"gpuscope --host {remote_host} history" in errors[0], run.err
    assert not any("Traceback" in ln for ln in run.err)
    row = _until(lambda: next((r for r in remote_runs(remote_host, str(script)) if r["ended_ns"]), None),
                 "the run ends there")
    assert row["exit_code"] == 7 and row["status"] == "failed", row
    out = sshd.ssh(f"cat {row['run_dir']}/stdout.log")
    assert out.stdout == "first line\nlast line\n", out
    _until(lambda: leftovers(sshd) == [], "the remote run's processes end")


def _until(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.3)


def test_run_there_with_the_remote_python_named(sshd, remote_host):
    """--python names an interpreter there that has no gpuscope (the hook is loaded by path)."""
    script = sshd.script(f"exe_{uuid.uuid4().hex[:8]}.py", "import sys\nprint('exe', sys.executable, flush=True)\n")
    proc = gpuscope("--host", remote_host, "run", "--python", "/usr/bin/python3.11", str(script))
    assert proc.returncode == 0, proc
    assert "exe /usr/bin/python3.11\n" in proc.stdout
    # without --python: the python3 the bootstrap found there, not the agent's private venv
    proc = gpuscope("--host", remote_host, "run", str(script))
    assert proc.returncode == 0 and "exe /usr/bin/python3\n" in proc.stdout, proc


def test_host_without_a_command_or_with_gui_opens_the_window_here():
    """`gpuscope --host H` and `--host H gui` are the local window's (it connects itself); with no
    display here that is the window's own one line, not an ssh error."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    for argv in (["--host", "no-such-host.invalid"], ["--host=no-such-host.invalid", "gui"]):
        assert_one_line(gpuscope(*argv, env=env), "no display")
    assert_one_line(gpuscope("--host=no-such-host.invalid", "history", env=env), "unknown host")
    assert_one_line(gpuscope("--host", "box", "--json", env=env), "needs a command")
