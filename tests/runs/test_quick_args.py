"""`gpuscope run`'s common command lines are read without argparse (commands/run.quick_args, issue
14.4): for each, the namespace must be the one argparse gives; every other line goes to argparse."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope import cli
from gpuscope.commands import run as run_cmd

QUICK = [
    ["x.py"],
    ["--quiet", "x.py"],
    ["-q", "x.py", "a", "b"],
    ["--json", "--quiet", "x.py", "--quiet", "-q", "--json"],
    ["--quiet", "--quiet", "x.py"],
    ["x.py", "-m", "mod", "--start-method", "fork"],
    ["--start-method", "spawn", "x.py", "--help"],
    ["--start-method", "forkserver", "-q", "dir/", "-x"],
    ["", "a"],
    ["x.py", "--start-method", "nope", "--interval", "5"],
]
NOT_QUICK = [
    [],
    ["--quiet"],
    ["--help"],
    ["-h", "x.py"],
    ["--qui", "x.py"],
    ["--start-method", "nope", "x.py"],
    ["--start-method"],
    ["--start-method=spawn", "x.py"],
    ["--", "x.py"],
    ["x.py", "--", "a"],
    ["-q", "x.py", "a", "--"],
    ["-m", "mod"],
    ["-", "x.py"],
    ["--interval", "0.5", "x.py"],
    ["-qj", "x.py"],
]


@pytest.mark.parametrize("argv", QUICK, ids=repr)
def test_a_quick_command_line_reads_as_argparse_reads_it(argv):
    quick = run_cmd.quick_args(argv)
    assert quick is not None
    full = cli.build_parser(["run", *argv]).parse_args(["run", *argv])
    assert vars(quick) == vars(full)


@pytest.mark.parametrize("argv", NOT_QUICK, ids=repr)
def test_any_other_command_line_goes_to_argparse(argv):
    assert run_cmd.quick_args(argv) is None


def test_the_usual_run_does_not_import_argparse(run_env, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint('argparse' in sys.modules)\n")
    probe = "import sys, runpy; sys.argv = ['gpuscope', 'run', '--quiet', sys.argv[1]]; " \
            "import atexit; atexit.register(lambda: print('gpuscope', 'argparse' in sys.modules, flush=True)); " \
            "runpy.run_module('gpuscope', run_name='__main__')"
    out = subprocess.run([sys.executable, "-c", probe, str(script)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["False", "gpuscope False"]


def test_an_error_is_still_argparses_one_line(run_env, tmp_path):
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--start-method", "nope", "x.py"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 2
    assert out.stderr.startswith("gpuscope run: error: argument --start-method: invalid choice: 'nope'")
    assert out.stderr.count("\n") == 1
