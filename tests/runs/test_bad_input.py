"""Bad input: one clear line (or a recorded failed run), never a gpuscope traceback, never a hang."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.runs.helpers import gpuscope, summary


def _one_line_error(proc):
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_script(run_env):
    proc = gpuscope("run", "no_such_script.py", env=run_env)
    assert proc.returncode == 2
    assert "script not found: no_such_script.py" in _one_line_error(proc)


def test_directory(run_env, tmp_path):
    proc = gpuscope("run", str(tmp_path), env=run_env)
    assert proc.returncode == 2
    assert "is a directory" in _one_line_error(proc)


def test_not_python(run_env, tmp_path):
    binary = tmp_path / "prog.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01" * 10)
    proc = gpuscope("run", str(binary), env=run_env)
    assert proc.returncode == 2
    assert "does not look like a Python script" in _one_line_error(proc)


def test_missing_interpreter(run_env, tmp_path):
    (tmp_path / "ok.py").write_text("print(1)\n")
    proc = gpuscope("run", "--python", "/nonexistent/python3", str(tmp_path / "ok.py"), env=run_env)
    assert proc.returncode == 2
    assert "Python interpreter not found" in _one_line_error(proc)


def test_unknown_start_method(run_env, tmp_path):
    (tmp_path / "ok.py").write_text("print(1)\n")
    proc = gpuscope("run", "--start-method", "thread", str(tmp_path / "ok.py"), env=run_env)
    assert proc.returncode == 2
    assert "invalid choice: 'thread'" in _one_line_error(proc)


def test_torchrun_without_torch(run_env, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (tmp_path / "ok.py").write_text("print(1)\n")
    proc = gpuscope("run", "--launcher", "torchrun", "--python", str(venv / "bin" / "python"),
                    str(tmp_path / "ok.py"), env=run_env)
    assert proc.returncode == 2
    assert "needs torch, which is not installed" in _one_line_error(proc)


@pytest.mark.parametrize("body, code, sig, marker", [
    ("def f(:\n", 1, None, b"SyntaxError"),
    ("raise RuntimeError('boom')\n", 1, None, b"RuntimeError: boom"),
    ("import sys\nsys.exit(7)\n", 7, None, None),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", None, "SIGSEGV", None),
])
def test_failures_are_recorded_runs(run_env, tmp_path, body, code, sig, marker):
    path = tmp_path / "bad.py"
    path.write_text(body)
    proc = gpuscope("run", "--json", str(path), env=run_env)
    result = summary(proc)
    assert result["status"] == "failed"
    assert result["exit_code"] == code and result["signal"] == sig
    assert proc.returncode == (code if sig is None else 128 + 11)
    if marker:
        assert marker in proc.stderr  # the script's own traceback, as Python prints it
    assert b"gpuscope/" not in proc.stderr.split(b"gpuscope: run")[0]  # no gpuscope frames in it
    history = gpuscope("history", "--json", env=run_env)
    import json

    row = json.loads(history.stdout)[0]
    assert row["id"] == result["run_id"] and row["status"] == "failed"
    assert row["signal"] == sig and row["exit_code"] == code
