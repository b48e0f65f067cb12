"""Every repeatable option accumulates: ``--kill A --kill B`` acts on both (issue 15.4)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from gpuscope import cli

PY = sys.executable


def _parse(argv: list[str]) -> argparse.Namespace:
    return cli.build_parser(argv).parse_args(argv)


def test_kill_twice_kills_both_real_processes(run_env):
    sleepers = [subprocess.Popen([PY, "-c", "import time; time.sleep(120)"]) for _ in range(2)]
    try:
        res = subprocess.run([PY, "-m", "gpuscope", "cleanup", "--no-gpu", "--json", "--grace", "1",
                              "--kill", str(sleepers[0].pid), "--kill", str(sleepers[1].pid), "--yes"],
                             env=run_env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        results = json.loads(res.stdout)["results"]
        assert len(results) == 2, results
        for p in sleepers:
            assert p.wait(timeout=10) < 0, f"pid {p.pid} was not killed: {res.stdout}"
    finally:
        for p in sleepers:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("command, option, values, dest", [
    ("cleanup", "--kill", ["11", "12 13", "14"], "kill"),
    ("cleanup", "--unlink", ["a", "b"], "unlink"),
    ("cleanup", "--expect", ["1:2.0", "3:4.0"], "expect"),
    ("run", "--annotate", ["m:f", "m:g"], "annotate"),
    ("run", "--nsys-arg", ["--sample=none", "--cpuctxsw=none"], "nsys_arg"),
    ("gui", "--annotate", ["m:f", "m:g"], "annotate"),
])
def test_repeated_option_accumulates(command, option, values, dest):
    argv = [command]
    for v in values:
        argv += [f"{option}={v}"] if v.startswith("-") else [option, *v.split()]
    if command == "run":
        argv.append("script.py")
    args = _parse(argv)
    got = [str(x) for x in getattr(args, dest)]
    assert got == [x for v in values for x in ([v] if v.startswith("-") else v.split())]


def test_defaults_are_not_shared_between_parses():
    p = cli.build_parser(["cleanup"])
    assert p.parse_args(["cleanup", "--kill", "5", "--kill", "6"]).kill == [5, 6]
    assert p.parse_args(["cleanup"]).kill == []
