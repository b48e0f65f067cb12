"""`gpuscope run -m MODULE`: the module's process is `main`; pools work as for scripts (torchrun -m: test_torchrun.py)."""

from __future__ import annotations

import json

import pytest

from gpuscope.errors import UserError
from gpuscope.spec import RunSpec
from tests.runs.helpers import SCRIPTS, gpuscope, summary, with_ranges


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_module_with_a_pool_has_roles_and_ranges(method, run_env):
    proc = gpuscope("run", "--json", "--start-method", method, "--cwd", str(SCRIPTS),
                    "-m", "modpkg.pooljob", "a", "--json", env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    # everything after the module name is the module's, --json included
    assert b"results 2 module modpkg.pooljob args ['a', '--json']" in proc.stdout
    result = summary(proc)
    ranged = with_ranges(result["processes"])
    assert sorted(p["role"] for p in ranged) == ["main", "pool worker", "pool worker"], result["processes"]
    main = next(p for p in ranged if p["role"] == "main")
    assert main["info"]["argv"][1:3] == ["-m", "modpkg.pooljob"]
    assert main["name"] == "gs:main" and main["range_names"] == ["expensive_op"]
    for p in ranged:
        assert p["start_method"] == method
        if p["role"] == "pool worker":
            assert set(p["range_names"]) == {"expensive_op", "gpuscope:expensive_op"}


def test_history_and_spec_carry_the_module(run_env):
    proc = gpuscope("run", "--json", "--cwd", str(SCRIPTS), "-m", "modpkg.helpers", env=run_env)
    assert proc.returncode == 0, proc.stderr.decode()
    run_id = summary(proc)["run_id"]
    hist = gpuscope("history", env=run_env)
    line = next(ln for ln in hist.stdout.decode().splitlines() if ln.startswith(run_id))
    assert line.endswith("-m modpkg.helpers")
    with open(summary(proc)["run_dir"] + "/spec.json") as fh:
        spec = json.load(fh)["spec"]
    assert spec["module"] == "modpkg.helpers" and spec["script"] == "-m modpkg.helpers"
    again = RunSpec.from_dict(spec)
    assert again.module == "modpkg.helpers" and again.target_args == ["-m", "modpkg.helpers"]


def test_module_spec_round_trip_and_validation(tmp_path):
    spec = RunSpec(script="", module="pkg.mod", args=("x",), cwd=str(tmp_path)).validated()
    assert spec.script == "-m pkg.mod" and spec.is_module
    assert RunSpec.from_dict(spec.to_dict()) == spec
    script_spec = RunSpec.from_dict({"script": "/x.py", "launcher": "python", "start_method": "fork"})
    assert script_spec.module is None and script_spec.target_args == ["/x.py"]  # specs stored before -m
    for bad in ("pkg/mod.py", "1pkg", "pkg..mod", "pkg.mod "):
        with pytest.raises(UserError, match="module name"):
            RunSpec(script="", module=bad if bad != "pkg.mod " else "pkg mod", cwd=str(tmp_path)).validated()


def test_bad_module_name_is_one_line(run_env):
    proc = gpuscope("run", "-m", "not/a/module", env=run_env)
    assert proc.returncode != 0
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "module name" in err[0] and "Traceback" not in err[0], err
    proc = gpuscope("run", env=run_env)
    assert proc.returncode != 0 and b"give a script or -m MODULE" in proc.stderr


def test_missing_module_is_a_recorded_failed_run(run_env):
    proc = gpuscope("run", "--json", "--cwd", str(SCRIPTS), "-m", "modpkg.nosuch", env=run_env)
    assert proc.returncode == 1
    assert b"No module named modpkg.nosuch" in proc.stderr
    result = summary(proc)
    assert result["status"] == "failed" and result["exit_code"] == 1
    assert [p["role"] for p in result["processes"] if p["role"] == "main"] == ["main"]
