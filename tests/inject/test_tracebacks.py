"""gpuscope's frames never show in a user's traceback (spawn children, pool tasks, --annotate)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.runs.helpers import gpuscope, script


def _normalise(text: str) -> list[str]:
    text = re.sub(r"0x[0-9a-f]+", "0x?", text)
    text = re.sub(r"\bpid \d+|\b\d{3,}\b", "N", text)
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 keeps the outermost wrapper's line")
def test_spawn_child_tracebacks_equal_plain_run(run_env):
    plain = subprocess.run([sys.executable, script("spawn_raises.py")], capture_output=True, env=run_env,
                           timeout=120)
    proc = gpuscope("run", "--quiet", "--annotate", "__main__:boom", script("spawn_raises.py"),
                    env=run_env, timeout=240)
    assert plain.stdout == proc.stdout == b"exit codes 1\n", (plain.stdout, proc.stdout)
    err = proc.stderr.decode()
    tb_lines = [ln for ln in err.splitlines() if ln.startswith("  File ")]
    assert tb_lines, err
    assert not [ln for ln in tb_lines if "gpuscope" in ln or "_gpuscope_inject" in ln], err
    assert "boom 1" in err and "boom 2" in err and "fails while the child re-imports" in err
    assert _normalise(err) == _normalise(plain.stderr.decode())
