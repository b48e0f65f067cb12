"""Stacks of processes gpuscope's hook did not reach: read from outside, or one line saying why not."""

from __future__ import annotations

import subprocess

from gpuscope.findings.stacks import outside_tool, read_from_outside


def test_a_process_that_is_not_python_gets_one_line():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        got = read_from_outside(proc.pid, "not injected")
    finally:
        proc.kill()
        proc.wait()
    assert got.threads == [] and got.source == "none"
    assert "\n" not in got.note and "backtrace" not in got.note.lower(), got.note
    tool = outside_tool()
    if tool is None:
        assert "neither py-spy nor pystack is installed" in got.note
    else:
        assert got.note.startswith(f"{tool[0]} could not read it: ") and len(got.note) > len(tool[0]) + 22, got.note


def test_a_process_that_ended_says_so():
    proc = subprocess.Popen(["true"])
    proc.wait()
    got = read_from_outside(proc.pid, "pool worker")
    assert got.threads == [] and got.source == "none"
    assert got.note == "ended before its stack could be read" or "neither py-spy nor pystack" in got.note, got.note
