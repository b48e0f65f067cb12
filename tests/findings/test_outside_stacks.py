"""Stacks of processes gpuscope's hook did not reach: read from outside by py-spy or pystack (each
tool on a real Python process), or one line saying why not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.findings.stacks import outside_tool, parse_outside, read_from_outside

TOOLS = Path(sys.executable).parent          # the test environment has both: py-spy and pystack
WAITER = ("import time\n"
          "def waiting_here():\n"
          "    time.sleep(60)\n"
          "print('ready', flush=True)\n"
          "waiting_here()\n")


@pytest.fixture
def waiter(tmp_path):
    """A plain Python process (no gpuscope hook) asleep in ``waiting_here`` (line 3 of its script)."""
    script = tmp_path / "waiter.py"
    script.write_text(WAITER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"
    time.sleep(0.2)           # from its print into the sleep
    yield proc.pid, script
    proc.kill()
    proc.wait()


def _only(monkeypatch, tmp_path, name: str | None) -> None:
    """PATH holding just ``name`` (a link to the installed tool), or nothing."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    if name is not None:
        os.symlink(TOOLS / name, folder / name)
    monkeypatch.setenv("PATH", str(folder))


@pytest.mark.parametrize("tool", ["py-spy", "pystack"])
def test_each_tool_reads_a_python_process_that_the_hook_did_not_reach(tool, waiter, monkeypatch, tmp_path):
    pid, script = waiter
    _only(monkeypatch, tmp_path, tool)
    assert outside_tool() == (tool, str(tmp_path / "bin" / tool))
    got = read_from_outside(pid, "not injected")
    assert got.source == tool and got.note == f"read by {tool}", got.note
    (main,) = [t for t in got.threads if t.ident == pid]
    assert main.frames[0].function == "waiting_here" and main.frames[0].line == 3, main.frames
    assert main.frames[0].file.endswith("waiter.py") and main.frames[-1].function == "<module>"


def test_parse_outside_reads_both_formats():
    spy = ('Process 12: python w.py\nPython v3.11.7\n\nThread 12 (idle): "MainThread"\n'
           "    waiting_here (w.py:3)\n    <module> (w.py:5)\n"
           'Thread 0x7f00 (active): "worker"\n    run (threading.py:1)\n')
    (main, worker) = parse_outside(spy)
    assert (main.name, main.ident, [(f.function, f.line) for f in main.frames]) == \
        ("MainThread", 12, [("waiting_here", 3), ("<module>", 5)])
    assert (worker.name, worker.ident) == ("worker", 0x7F00)
    stack = ("Traceback for thread 12 (python3) [] (most recent call last):\n"
             '    (Python) File "/x/w.py", line 5, in <module>\n        waiting_here()\n'
             '    (Python) File "/x/w.py", line 3, in waiting_here\n        time.sleep(60)\n')
    (only,) = parse_outside(stack)
    assert [(f.function, f.file, f.line) for f in only.frames] == [("waiting_here", "/x/w.py", 3),
                                                                   ("<module>", "/x/w.py", 5)]
    assert parse_outside("no stacks here\n") == []


def test_a_process_that_is_not_python_gets_one_line(monkeypatch, tmp_path):
    _only(monkeypatch, tmp_path, "py-spy")
    proc = subprocess.Popen(["/bin/sleep", "30"])
    try:
        got = read_from_outside(proc.pid, "not injected")
    finally:
        proc.kill()
        proc.wait()
    assert got.threads == [] and got.source == "none"
    assert "\n" not in got.note and "backtrace" not in got.note.lower(), got.note
    assert got.note.startswith("py-spy could not read it: ") and len(got.note) > len("py-spy could not read it: ")


def test_without_either_tool_it_says_what_to_install(monkeypatch, tmp_path, waiter):
    _only(monkeypatch, tmp_path, None)
    assert outside_tool() is None
    got = read_from_outside(waiter[0], "not injected")
    assert got.threads == [] and "neither py-spy nor pystack is installed" in got.note


def test_a_process_that_ended_says_so(monkeypatch, tmp_path):
    _only(monkeypatch, tmp_path, "py-spy")
    proc = subprocess.Popen(["/bin/true"])
    proc.wait()
    got = read_from_outside(proc.pid, "pool worker")
    assert got.threads == [] and got.source == "none"
    assert got.note == "ended before its stack could be read", got.note
