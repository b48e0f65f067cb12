"""A plain `gpuscope run SCRIPT` starts its program before gpuscope's own imports (runs/early.py,
issue 14.4): the same checks, run folder, argv, environment and session as the usual path, the
same errors when a check fails, and never a program left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gpuscope.commands import run as run_cmd
from gpuscope.runs import early as early_start
from gpuscope.runs.launcher import build_command

SLEEPER = "import time\ntime.sleep(60)\n"


def _args(argv):
    args = run_cmd.quick_args(argv)
    assert args is not None and early_start.eligible(args)
    return args


@pytest.mark.parametrize("argv", [["s.py"], ["--start-method", "spawn", "-q", "s.py", "a", "--b"]], ids=repr)
def test_the_early_start_is_what_the_usual_path_would_start(argv, gpuscope_home, tmp_path, monkeypatch):
    (tmp_path / "s.py").write_text("print('x')\n")
    monkeypatch.chdir(tmp_path)
    args = _args(argv)
    early = early_start.start(args.script, list(args.args), args.start_method, live=False)
    assert early is not None
    try:
        spec = run_cmd.spec_from_args(args)
        validated = spec.validated()
        assert early.spec(spec) == validated
        usual = build_command(validated, early.run_id, early.run_dir)
        assert (early.command.argv, early.command.env, early.command.cwd) == (usual.argv, usual.env, usual.cwd)
        assert early.run_dir.is_dir() and (early.run_dir / "events").is_dir()
        assert os.getsid(early.proc.pid) == early.proc.pid          # its own session, as Run starts it
    finally:
        early.proc.wait(timeout=60)
        early.abandon()


def test_a_failed_check_starts_nothing_and_the_usual_error_follows(run_env, gpuscope_home, tmp_path):
    assert early_start.start("missing.py", [], "default", live=False) is None
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", "missing.py"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 2
    assert out.stderr == "gpuscope: error: script not found: missing.py\n"
    runs = gpuscope_home / "runs"
    assert not runs.exists() or not any(runs.iterdir())     # no run folder left by the early start


def test_abandon_ends_the_program_started_early(gpuscope_home, tmp_path, monkeypatch):
    (tmp_path / "s.py").write_text(SLEEPER)
    monkeypatch.chdir(tmp_path)
    early = early_start.start("s.py", [], "default", live=False)
    assert early is not None and early.proc.poll() is None
    early.abandon()
    assert early.proc.returncode == -signal.SIGKILL


PROBE = """
import runpy, sys
seen = {}
def hook(event, args):
    if event == "subprocess.Popen" and "first" not in seen:
        seen["first"] = sorted(m for m in ("dataclasses", "inspect", "gpuscope.spec", "gpuscope.runs.supervisor",
                                           "argparse") if m in sys.modules)
sys.addaudithook(hook)
import atexit
atexit.register(lambda: print("before the program:", seen["first"], flush=True))
sys.argv = ["gpuscope", "run", "--quiet", sys.argv[1]]
runpy.run_module("gpuscope", run_name="__main__")
"""


def test_the_program_starts_before_dataclasses_and_the_supervisor_are_imported(run_env, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('program')\n")
    out = subprocess.run([sys.executable, "-c", PROBE, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=run_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["program", "before the program: []"]


def test_presses_held_during_the_early_start_stop_the_run_once_it_is_set_up():
    held = run_cmd._HeldSignals()
    try:
        os.kill(os.getpid(), signal.SIGINT)       # counted, not raised
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    finally:
        said, stops = [], []
        with run_cmd.stop_on_signals(lambda: stops.append(1), said.append, "stopping", held):
            assert (said, len(stops)) == (["stopping"], 2)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_no_recorder_of_an_early_started_run_changes_its_command(gpuscope_home, tmp_path, monkeypatch):
    """Recorders may edit the command in ``prepare`` (nsys wraps it), which runs before the usual
    spawn; an early-started program is already running then, so every recorder a run eligible for
    the early start gets must leave argv, environment and folder as they are."""
    from gpuscope.findings.recorder import FindingsRecorder
    from gpuscope.runs.recorder import Launch
    from gpuscope.runs.recorders import default_recorders

    (tmp_path / "s.py").write_text("print('x')\n")
    monkeypatch.chdir(tmp_path)
    args = _args(["--start-method", "fork", "s.py", "a"])
    spec = run_cmd.spec_from_args(args).validated()
    run_dir = tmp_path / "run"
    command = build_command(spec, "r1", run_dir)
    launch = Launch(spec, "r1", run_dir, list(command.argv), dict(command.env), command.cwd)
    for recorder in [*default_recorders(spec), FindingsRecorder()]:   # what `gpuscope run` gives a run
        recorder.prepare(launch)
    assert (launch.argv, launch.env, launch.cwd) == (command.argv, command.env, command.cwd)
