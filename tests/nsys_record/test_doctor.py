"""``gpuscope doctor``: real checks against the provisioned nsys, and the failures it must report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuscope import cli
from gpuscope.nsys import locate

pytestmark = pytest.mark.nsys


def _doctor(args, env, timeout=180):
    return subprocess.run([sys.executable, "-m", "gpuscope", "doctor", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_doctor_json_on_a_working_setup(newest, run_env):
    proc = _doctor(["--json", "--nsys", newest.release], run_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert checks["python"]["ok"] and checks["nvtx"]["ok"] and "nvtx 0.2.1" in checks["nvtx"]["detail"]
    nsys_lines = [c for c in report["checks"] if c["name"] == "nsys"]
    assert any(newest.version in c["detail"] and "(used for runs)" in c["detail"] for c in nsys_lines)
    assert checks[f"importer {newest.release}"]["ok"]
    rec = checks[f"record {newest.release}"]
    assert rec["ok"] and rec["essential"] and "1 range(s) and 1 mark(s)" in rec["detail"]
    assert "nvml" in checks and checks["nvml"]["essential"] is False
    if not checks["nvml"]["ok"]:
        assert checks["nvml"]["detail"].startswith("no NVIDIA GPU / driver")


def test_doctor_reports_an_nvtx_too_new_for_nsys(provisioned, nvtx13_python, run_env):
    release = "2022.4" if "2022.4" in provisioned else min(provisioned)
    proc = _doctor(["--nsys", release, "--python", nvtx13_python], run_env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    bad = [i for i, ln in enumerate(lines) if ln.startswith(f"✗ record {release}:")]
    assert bad and "rejected the nvtx package's payload extension" in lines[bad[0]]
    assert lines[bad[0] + 1].strip() .startswith("→ pip install 'nvtx<=0.2.11'")
    assert lines[-1] == "doctor: 1 essential check(s) failed"


def test_doctor_without_nsys_fails_with_advice(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GPUSCOPE_NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GPUSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(locate, "SYSTEM_GLOBS", ())
    assert cli.main(["doctor", "--no-probe"]) == 1
    out = capsys.readouterr().out
    assert "✗ nsys: Nsight Systems (nsys) not found; install it or run scripts/provision_nsys.py" in out
    assert "    → run scripts/provision_nsys.py or set GPUSCOPE_NSYS" in out


def test_doctor_finds_nsys_through_path(provisioned, tmp_path, run_env):
    """No GPUSCOPE_NSYS, no cache: `gpuscope doctor` finds the build whose usr/bin is on PATH."""
    from tests.nsys_record.test_locate import path_env

    inst = provisioned[min(provisioned, key=lambda k: provisioned[k].version_tuple)]
    env = dict(path_env(inst, cache=str(tmp_path / "empty-cache")), GPUSCOPE_HOME=run_env["GPUSCOPE_HOME"])
    proc = _doctor(["--json", "--no-probe"], env)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["nsys"]["ok"], checks
    assert checks["nsys"]["detail"] == f"{inst.version} at {inst.nsys} [PATH] (used for runs)"
    importer = checks[f"importer {inst.release}"]
    assert importer["ok"] and str(inst.importer) in importer["detail"]
