"""`gpuscope run` keeps the program's lines whole: a live finding starts a line of its own (held back
until the program ends its line), each finding is printed once, and --quiet keeps them for the end."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "scripts" / "pytest_progress.py"
PROGRESS = re.compile(r"^test_progress\.py \.{41}\s+\[100%\]$")


def _run_pytest(tmp_path: Path, run_env: dict[str, str], *flags: str) -> list[str]:
    """pytest (41 tests; the first forks beside a thread) under `gpuscope run`, stdout and stderr
    into one pipe as in a terminal: the lines a reader sees."""
    shutil.copy(SCRIPT, tmp_path / "test_progress.py")
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "run", *flags, "--cwd", str(tmp_path), "-m", "pytest",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "test_progress.py"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=run_env, timeout=240)
    text = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, text
    return text.splitlines()


def test_live_finding_keeps_pytest_progress_whole_and_is_printed_once(tmp_path, run_env):
    lines = _run_pytest(tmp_path, run_env)
    text = "\n".join(lines)
    assert [ln for ln in lines if PROGRESS.match(ln)], text                 # the progress line, whole
    assert all(ln.startswith("gpuscope: ") for ln in lines if "gpuscope: " in ln), text
    told = [ln for ln in lines if "[fork-with-threads]" in ln]
    assert len(told) == 1 and told[0].startswith("gpuscope: finding: "), text


def test_quiet_holds_findings_until_the_end(tmp_path, run_env):
    lines = _run_pytest(tmp_path, run_env, "--quiet")
    text = "\n".join(lines)
    assert [ln for ln in lines if PROGRESS.match(ln)], text
    ours = [i for i, ln in enumerate(lines) if ln.startswith("gpuscope: ")]
    assert ours and all("[fork-with-threads]" in lines[i] for i in ours), text    # no notes, no table
    assert len(ours) == 1 and ours[0] > next(i for i, ln in enumerate(lines) if " passed in " in ln), text
