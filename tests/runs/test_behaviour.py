"""gpuscope never changes what the program does: output, exit code, argv, __main__, sitecustomize."""

from __future__ import annotations

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


def test_json_summary_holds_what_the_program_did(run_env):
    """pool_nvtx.py: main runs expensive_op once, then a spawn Pool(2) whose workers each run one task
    (a barrier makes both take one). The summary's values must say exactly that."""
    proc = gpuscope("run", "--json", "--start-method", "spawn", script("pool_nvtx.py"), env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.startswith(b"results 2\n")
    result = summary(proc)
    run_dir = Path(result["run_dir"])
    assert run_dir.is_dir() and run_dir.name == result["run_id"]
    assert (result["status"], result["exit_code"], result["signal"]) == ("exited", 0, None)
    procs = result["processes"]
    by_role = {}
    for p in procs:
        by_role.setdefault(p["role"], []).append(p)
    assert sorted(by_role) == ["main", "pool worker", "resource tracker"], procs
    (main,) = by_role["main"]
    workers = by_role["pool worker"]
    assert len(workers) == 2 and len(by_role["resource tracker"]) == 1
    logged = {int(f.name.split("-")[0]) for f in (run_dir / "events").glob("*.log")}
    assert sorted(p["pid"] for p in procs) == sorted(logged)          # one row per process log, no more
    assert main["exit_code"] == 0 and main["ppid"] not in logged
    assert all(p["ppid"] == main["pid"] for p in workers + by_role["resource tracker"])
    assert {p["start_method"] for p in procs} == {"spawn"} and {p["rank"] for p in procs} == {None}
    assert sorted(w["mp_name"] for w in workers) == ["SpawnPoolWorker-1", "SpawnPoolWorker-2"]
    assert (main["ranges"], main["range_names"]) == (1, ["expensive_op"])
    for w in workers:
        assert (w["ranges"], sorted(w["range_names"])) == (2, ["expensive_op", "gpuscope:expensive_op"]), w
        assert {r["name"]: r["count"] for r in w["top_ranges"]} == {"expensive_op": 1, "gpuscope:expensive_op": 1}
    assert by_role["resource tracker"][0]["ranges"] == 0
