"""`gpuscope run --forkserver-preload MOD,...`: the forkserver imports those modules once, so its
children start with them (what the forkserver-preload finding's fix applies); a bad name is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.errors import UserError
from gpuscope.runs.launcher import build_command
from gpuscope.spec import RunSpec

SCRIPT = """
import multiprocessing as mp, sys
def loaded(_):
    return "colorsys" in sys.modules
if __name__ == "__main__":
    with mp.get_context("forkserver").Pool(1) as pool:
        print("child has colorsys:", pool.map(loaded, [0])[0])
"""


@pytest.mark.parametrize("preload", [None, "colorsys"])
def test_the_forkserver_children_start_with_the_preloaded_modules(preload, run_env, tmp_path):
    script = tmp_path / "fs.py"
    script.write_text(SCRIPT)
    flags = ["--forkserver-preload", preload] if preload else []
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", *flags, str(script)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"child has colorsys: {bool(preload)}", out.stdout


def test_the_preload_reaches_the_environment_and_is_checked(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    spec = RunSpec("s.py", cwd=str(tmp_path), forkserver_preload=("numpy", " pandas")).validated()
    assert spec.forkserver_preload == ("numpy", "pandas")
    assert build_command(spec, "r", tmp_path).env["GPUSCOPE_FORKSERVER_PRELOAD"] == "numpy,pandas"
    plain = build_command(RunSpec("s.py", cwd=str(tmp_path)).validated(), "r", tmp_path,
                          base_env={"GPUSCOPE_FORKSERVER_PRELOAD": "x"})
    assert "GPUSCOPE_FORKSERVER_PRELOAD" not in plain.env      # not inherited from gpuscope's own
    assert RunSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(UserError, match="--forkserver-preload takes a module name"):
        RunSpec("s.py", cwd=str(tmp_path), forkserver_preload=("no way",)).validated()
