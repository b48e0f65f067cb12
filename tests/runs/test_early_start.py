"""A plain `gpuscope run SCRIPT` starts its program before gpuscope's own imports (runs/early.py):
the same checks, run folder, argv, environment and session as the usual path, the same errors
when a check fails, and never a program left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope import cli
from gpuscope.commands import run as run_cmd
from gpuscope.runs import early as early_start
from gpuscope.runs.launcher import Command, build_command
from gpuscope.spec import RunSpec
from tests.fresh_python import bare_env

SLEEPER = "import time\ntime.sleep(60)\n"


def _spec(argv: list[str]) -> RunSpec:
    """The RunSpec of ``gpuscope run ARGV``, as the command reads it."""
    return run_cmd.spec_from_args(cli.build_parser(["run", *argv]).parse_args(["run", *argv]))


@pytest.mark.parametrize("argv", [["s.py"], ["--start-method", "spawn", "-q", "s.py", "a", "--b"],
                                  ["--json", "s.py", "--interval", "5"]], ids=repr)
def test_a_plain_script_run_is_eligible(argv):
    assert early_start.eligible(_spec(argv))


@pytest.mark.parametrize("argv", [["-m", "mod"], ["--interval", "0.5", "s.py"], ["--nsys", "s.py"],
                                  ["--annotate", "m:f", "s.py"], ["--cwd", "/", "s.py"], ["--python", "py", "s.py"],
                                  ["--launcher", "torchrun", "s.py"], ["--nproc", "2", "s.py"],
                                  ["--job-dir", "j", "s.py"]], ids=repr)
def test_a_run_with_other_options_takes_the_usual_path(argv):
    assert not early_start.eligible(_spec(argv))


def _commands(parser) -> list[str]:
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return list(sub.choices)


def test_only_the_named_commands_parser_is_built():
    """`gpuscope run ...` makes no parser for the other commands; the bare `gpuscope` (its --help,
    its usage errors) still lists them all."""
    assert _commands(cli.build_parser(["run", "--quiet", "s.py"])) == ["run"]
    assert _commands(cli.build_parser(["--help"])) == list(cli.COMMANDS)
    assert _commands(cli.build_parser(["nosuch"])) == list(cli.COMMANDS)


def test_a_usage_error_is_argparses_one_line(run_env, tmp_path):
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--start-method", "nope", "x.py"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 2
    assert out.stderr.startswith("gpuscope run: error: argument --start-method: invalid choice: 'nope'")
    assert out.stderr.count("\n") == 1


@pytest.mark.parametrize("argv", [["s.py"], ["--start-method", "spawn", "-q", "s.py", "a", "--b"]], ids=repr)
def test_the_early_start_is_what_the_usual_path_would_start(argv, gpuscope_home, tmp_path, monkeypatch):
    (tmp_path / "s.py").write_text("print('x')\n")
    monkeypatch.chdir(tmp_path)
    spec = _spec(argv)
    early = early_start.start(spec, live=False)
    assert early is not None
    try:
        validated = spec.validated()
        assert early.spec(spec) == validated
        usual = build_command(validated, early.run_id, early.run_dir)
        assert (early.command.argv, early.command.env, early.command.cwd) == (usual.argv, usual.env, usual.cwd)
        assert os.path.isdir(early.run_dir) and os.path.isdir(os.path.join(early.run_dir, "events"))
        assert os.getsid(early.proc.pid) == early.proc.pid          # its own session, as Run starts it
    finally:
        early.proc.wait()
        early.abandon()


def test_a_failed_check_starts_nothing_and_the_usual_error_follows(run_env, gpuscope_home, tmp_path):
    assert early_start.start(RunSpec("missing.py"), live=False) is None
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", "missing.py"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 2
    assert out.stderr == "gpuscope: error: script not found: missing.py\n"
    runs = gpuscope_home / "runs"
    assert not runs.exists() or not any(runs.iterdir())     # no run folder left by the early start


def test_abandon_ends_the_program_started_early(gpuscope_home, tmp_path, monkeypatch):
    (tmp_path / "s.py").write_text(SLEEPER)
    monkeypatch.chdir(tmp_path)
    early = early_start.start(RunSpec("s.py"), live=False)
    assert early is not None and early.proc.poll() is None
    early.abandon()
    assert early.proc.returncode == -signal.SIGKILL


PROBE = """
import runpy, sys
bare = set(sys.modules)     # what this interpreter loaded before gpuscope
seen = {}
def hook(event, args):
    if event == "subprocess.Popen" and "first" not in seen:
        seen["first"] = (event, sorted(set(sys.modules) - bare))
sys.addaudithook(hook)
import atexit
atexit.register(lambda: print("before the program:", *seen["first"], flush=True))
command = sys.argv[2] if len(sys.argv) > 2 else None
sys.argv = ["gpuscope", "run", "--quiet", sys.argv[1]]
if command:
    with open(command) as fh:    # the `gpuscope` command file, as its shebang runs it (runpy.run_path imports typing)
        exec(compile(fh.read(), command, "exec"), {"__name__": "__main__"})
else:
    runpy.run_module("gpuscope", run_name="__main__")
"""
COMMAND = Path(__file__).resolve().parents[2] / "packaging" / "bin" / "gpuscope"
# gpuscope's recording machinery and what it pulls in load while the program starts, not before;
# the start's records are named tuples, so dataclasses (with inspect) loads after it too
HEAVY = ("gpuscope.runs.supervisor", "gpuscope.runs.output", "gpuscope.runs.recorders", "gpuscope.store.db",
         "gpuscope.telemetry.sampler", "gpuscope.findings.recorder", "sqlite3", "platformdirs", "psutil", "numpy",
         "dataclasses", "inspect")


@pytest.mark.parametrize("home,start", [("GPUSCOPE_HOME", "-m"), ("XDG_DATA_HOME", "-m"),
                                        ("XDG_DATA_HOME", "command")])
def test_the_program_starts_before_anything_heavy_is_imported(home, start, run_env, tmp_path):
    """None of gpuscope's recording machinery before the program starts, with gpuscope's folder
    from GPUSCOPE_HOME or from the platform's default (XDG_DATA_HOME: platformdirs is not imported
    for it on Linux), started as ``python -m gpuscope`` or by the ``gpuscope`` command pip installs."""
    script = tmp_path / "s.py"
    script.write_text("print('program')\n")
    env = dict(run_env)
    if home == "XDG_DATA_HOME":
        env.pop("GPUSCOPE_HOME")
        env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    command = [str(COMMAND)] if start == "command" else []
    out = subprocess.run([sys.executable, "-S", "-c", PROBE, str(script), *command], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=bare_env(env))
    assert out.returncode == 0, out.stderr[-2000:]
    program, before = out.stdout.splitlines()
    assert program == "program" and before.startswith("before the program: subprocess.Popen "), before
    loaded = before.split(" ", 4)[4]
    assert "'gpuscope.runs.early'" in loaded, loaded
    assert not [m for m in HEAVY if repr(m) in loaded], loaded
    if home == "XDG_DATA_HOME":
        assert (tmp_path / "xdg" / "gpuscope" / "runs").is_dir()


# what a plain run never needs: other commands' packages, the nsys and torch readers, the app
NOT_ON_THE_RUN_PATH = ("gpuscope.cleanup", "gpuscope.attach", "gpuscope.torchtrace", "gpuscope.nsys",
                       "gpuscope.analysis", "gpuscope.gpu", "gpuscope.views", "gpuscope.app", "gpuscope.api",
                       "gpuscope.findings.gpu_rules", "gpuscope.findings.torch_ops_rules",
                       "gpuscope.findings.attach_rules", "gpuscope.procs.shm", "gpuscope.store.retention",
                       "gpuscope.store.cleanup_log", "gpuscope.fix",
                       "numpy", "psutil", "PySide6")
AT_EXIT = "\natexit.register(lambda: print('at exit:', *sorted(set(sys.modules) - bare), flush=True))\n"


def test_a_plain_run_imports_nothing_it_does_not_use(run_env, tmp_path):
    """Up to its exit, a plain run of an empty script loads none of the packages of other commands,
    nor the readers of inputs it does not have (nsys, torch traces, /dev/shm users)."""
    script = tmp_path / "s.py"
    script.write_text("")
    probe = PROBE.replace("\ncommand = ", AT_EXIT + "command = ", 1)
    out = subprocess.run([sys.executable, "-S", "-c", probe, str(script)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=bare_env(run_env))
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("at exit: ")]
    loaded = line.split()[2:]
    assert "gpuscope.findings.engine" in loaded and "gpuscope.trace.process_rows" in loaded, loaded
    assert not [m for m in loaded if m.startswith(NOT_ON_THE_RUN_PATH)], loaded


def test_the_installed_command_is_the_packaged_one():
    """The environment's ``gpuscope`` (installed by the README's commands) is packaging/bin/gpuscope
    with this environment's python on its first line, and it runs."""
    installed = Path(sys.executable).parent / "gpuscope"
    assert installed.is_file(), f"{installed}: install gpuscope into this environment (README)"
    first, _, rest = installed.read_text().partition("\n")
    assert first.startswith("#!") and Path(first[2:].split()[0]).parent == installed.parent, first
    assert rest == COMMAND.read_text().partition("\n")[2]
    out = subprocess.run([str(installed), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("gpuscope "), (out.stdout, out.stderr)


def test_the_spawn_lists_the_processes_before_the_program(tmp_path):
    command = Command([sys.executable, "-c", "import sys; sys.exit(3)"], dict(os.environ), os.getcwd())
    spawned = early_start._spawn(command, False)
    assert spawned is not None
    proc, read_out, existing = spawned
    assert str(os.getpid()) in existing.pids and str(proc.pid) not in existing.pids
    assert proc.wait() == 3
    os.close(read_out)
    proc.stderr.close()


def test_a_program_that_cannot_start_leaves_nothing_open(tmp_path):
    """A program that is not there, a folder that is gone: None, no descriptor left open (Run's
    Popen starts it again and words the error)."""
    before = sorted(os.listdir("/proc/self/fd"))
    assert early_start._spawn(Command([str(tmp_path / "missing")], {}, os.getcwd()), False) is None
    assert early_start._spawn(Command(["/bin/true"], {}, str(tmp_path / "gone")), False) is None
    assert sorted(os.listdir("/proc/self/fd")) == before


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
    spec = _spec(["--start-method", "fork", "s.py", "a"]).validated()
    run_dir = tmp_path / "run"
    command = build_command(spec, "r1", run_dir)
    launch = Launch(spec, "r1", run_dir, list(command.argv), dict(command.env), command.cwd)
    for recorder in [*default_recorders(spec), FindingsRecorder()]:   # what `gpuscope run` gives a run
        recorder.prepare(launch)
    assert (launch.argv, launch.env, launch.cwd) == (command.argv, command.env, command.cwd)


ESCAPED_HOLDER = """
import subprocess, sys
# a daemon that left the run (new session, no environment: no run marker) and keeps stdout/stderr
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={}, start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
"""


@pytest.mark.parametrize("escaped", [False, True])
def test_the_programs_output_pipes_are_closed_once_read_to_their_end(escaped, gpuscope_home, tmp_path,
                                                                        monkeypatch):
    """The run reads the early-started program's stdout and stderr to their end and closes them:
    at its end, or, when a process that left the run still holds them (the run ends without
    waiting for it, with a note), as soon as that process is gone. (Before, stderr stayed open
    in the second case until the garbage collector found it: a ResourceWarning in the suite.)"""
    from gpuscope.runs.supervisor import Run

    (tmp_path / "s.py").write_text(ESCAPED_HOLDER if escaped else "print('x')\n")
    pid_file = tmp_path / "daemon.pid"
    monkeypatch.chdir(tmp_path)
    spec = _spec(["s.py", str(pid_file)])
    early = early_start.start(spec, live=False)
    assert early is not None
    result = Run(spec, early=early).start().wait()
    assert result.status == "exited"
    assert bool([n for n in result.notes if "outlived the run" in n]) == escaped, result.notes
    stderr = early.proc.stderr
    if escaped:
        assert not stderr.closed    # the daemon still holds it: the pump still reads it
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not stderr.closed:
        assert time.monotonic() < deadline, "stderr still open after the last process that held it ended"
        time.sleep(0.02)
