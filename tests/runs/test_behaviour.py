"""gpuscope never changes what the program does: output, exit code, argv, __main__, sitecustomize."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.runs.helpers import gpuscope, script, summary


def _plain(path: str, *args: str, env=None, cwd=None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, path, *args], capture_output=True, env=env, cwd=cwd, timeout=60)


def test_stdout_and_exit_code_identical(run_env, tmp_path):
    plain = _plain(script("output_exit.py"), "a", "b c", env=run_env, cwd=tmp_path)
    under = gpuscope("run", "--quiet", script("output_exit.py"), "a", "b c", env=run_env, cwd=str(tmp_path))
    assert plain.returncode == 3
    assert under.returncode == 3
    assert under.stdout == plain.stdout  # byte for byte, raw bytes and argv/__name__/sys.path included
    assert under.stderr == plain.stderr  # --quiet: nothing of gpuscope's own


def test_run_folder_keeps_exact_output(run_env, tmp_path):
    plain = _plain(script("output_exit.py"), env=run_env, cwd=tmp_path)
    under = gpuscope("run", "--json", script("output_exit.py"), env=run_env, cwd=str(tmp_path))
    result = summary(under)
    run_dir = Path(result["run_dir"])
    assert (run_dir / "stdout.log").read_bytes() == plain.stdout
    assert (run_dir / "stderr.log").read_bytes() == plain.stderr
    assert result["exit_code"] == 3 and result["status"] == "failed"
    assert under.returncode == 3


def test_users_sitecustomize_still_runs(run_env, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    target = tmp_path / "t.py"
    target.write_text("import builtins, sys\nprint(getattr(builtins, 'USER_SITE_RAN', False))\n"
                      "print(any('inject/boot' in p for p in sys.path))\n")
    env = dict(run_env, PYTHONPATH=str(site))
    proc = gpuscope("run", "--quiet", str(target), env=env)
    assert proc.stdout == b"True\nFalse\n", proc.stderr


def test_injection_failure_never_reaches_the_program(tmp_path):
    """With an unwritable run folder the hook cannot log; the program runs exactly as without it."""
    boot = Path(__file__).resolve().parents[2] / "gpuscope" / "inject" / "boot"
    target = tmp_path / "t.py"
    target.write_text("import nvtx\n@nvtx.annotate()\ndef f():\n    return 41\nprint(f() + 1)\n")
    env = dict(os.environ, PYTHONPATH=str(boot), GPUSCOPE_RUN_DIR="/proc/not-writable",
               GPUSCOPE_RUN_ID="x", GPUSCOPE_SCRIPT=str(target))
    proc = subprocess.run([sys.executable, str(target)], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == b"42\n"
    assert proc.stderr == b""


def test_interpreter_without_gpuscope_is_injected(run_env, tmp_path):
    """Another virtualenv (no gpuscope, no nvtx) is still reached: roles and pool tasks recorded."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import gpuscope"], capture_output=True, cwd=tmp_path)
    assert check.returncode != 0  # gpuscope really is absent there
    target = tmp_path / "pool.py"
    target.write_text("import multiprocessing as mp\n\ndef sq(x):\n    return x * x\n\n"
                      "if __name__ == '__main__':\n    with mp.Pool(2) as p:\n        print(sum(p.map(sq, range(10))))\n")
    proc = gpuscope("run", "--json", "--python", str(python), "--start-method", "spawn", str(target), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    result = summary(proc)
    roles = [p["role"] for p in result["processes"]]
    assert "main" in roles and "pool worker" in roles
    assert any("gpuscope:sq" in p["range_names"] for p in result["processes"])
    injected = [p for p in result["processes"] if p["role"] != "not injected"]
    assert all(p["info"]["executable"] == str(python) for p in injected)
    assert proc.stdout.startswith(b"285\n")


def test_json_keys_are_documented(run_env):
    proc = gpuscope("run", "--json", "--start-method", "spawn", script("pool_nvtx.py"), env=run_env)
    result = summary(proc)
    assert {"run_id", "exit_code", "signal", "run_dir", "processes"} <= result.keys()
    for p in result["processes"]:
        assert {"pid", "ppid", "role", "start_method", "rank", "exit_code", "ranges", "range_names"} <= p.keys()
    json.dumps(result)
