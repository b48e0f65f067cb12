"""``gpuscope --host H --help`` is the program's own help (it names --host), exit 0, and connects
to nothing; ``gpuscope --host H COMMAND --help`` still goes to the host (no sshd needed: an ssh
program that does not exist shows where the line went)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

NO_SSH = "/nonexistent/gpuscope-test-ssh"


def _gpuscope(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUSCOPE_SSH": NO_SSH}
    return subprocess.run([sys.executable, "-m", "gpuscope", *argv], capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.parametrize("argv", [("--host", "me@box:2222", "--help"), ("--host=box", "-h")])
def test_host_then_help_shows_the_top_level_help(argv):
    proc = _gpuscope(*argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: gpuscope") and "--host [USER@]HOST[:PORT]" in proc.stdout
    assert "history" in proc.stdout and proc.stderr == ""


def test_host_command_help_still_goes_to_the_host():
    proc = _gpuscope("--host", "me@box:2222", "history", "--help")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"gpuscope: error: cannot connect: the ssh program '{NO_SSH}' is not installed or not on PATH "
        "(from GPUSCOPE_SSH)"]
