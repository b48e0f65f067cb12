"""``gpuscope report --redact``: a real nsys recording whose environment and command line hold a
token; the redacted copy holds it nowhere in its bytes (free pages included), yet reads as the
same report. Also the refusal of a ``.nsys-rep`` alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuscope.nsys import locate
from tests.nsys_versions import VERSIONS

INSTALLS = locate.provisioned_installs()
TOKEN = "tok_7Qz3RedactMe_91f0c2a8d4"
ARG_ONLY = "argonly_5e3b9d7c1f"   # on the command line alone: no environment variable names it
PROGRAM = """
import os, sys, nvtx
with nvtx.annotate("step"):
    with nvtx.annotate("uses " + os.environ["MY_API_TOKEN"][:4]):
        print("arguments:", len(sys.argv) - 1)
"""


def _gpuscope(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(params=[r for r in VERSIONS if r in INSTALLS] or ["missing"])
def nsys_env(request, run_env):
    if request.param == "missing":
        if os.environ.get("CI") == "true":
            pytest.fail("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
        pytest.skip("Nsight Systems is not provisioned (run scripts/provision_nsys.py)")
    return dict(run_env, GPUSCOPE_NSYS=str(INSTALLS[request.param].nsys))


@pytest.mark.nsys
def test_redacted_export_holds_the_token_nowhere_in_its_bytes(nsys_env, tmp_path):
    script = tmp_path / "secret_run.py"
    script.write_text(PROGRAM)
    env = dict(nsys_env, MY_API_TOKEN=TOKEN)
    res = _gpuscope(env, "run", "--json", "--nsys", "--nsys-trace", "nvtx", str(script), f"--api-token={TOKEN}",
                   ARG_ONLY)
    assert res.stdout.strip(), res.stderr[-2000:]
    result = json.loads(res.stdout.splitlines()[-1])
    assert result["status"] == "exited" and result["nsys"]["ok"], (result, res.stderr[-2000:])
    export = result["run_dir"] + "/report.sqlite"
    with open(export, "rb") as fh:
        original = fh.read()
    assert TOKEN.encode() in original   # the test plants what nsys really keeps
    # 2022.4 keeps no arguments in its export; later releases do (META_DATA_CAPTURE PROCESS_n:ARGUMENT_n)
    assert ARG_ONLY.encode() in original or "/2022.4/" in nsys_env["GPUSCOPE_NSYS"]
    out = tmp_path / "shared.sqlite"
    red = _gpuscope(nsys_env, "report", "--redact", str(out), result["run_dir"])
    assert red.returncode == 0, red.stderr
    assert TOKEN.encode() not in out.read_bytes()
    assert TOKEN[4:].encode() not in out.read_bytes()   # not even a part after the range's prefix
    assert ARG_ONLY.encode() not in out.read_bytes()
    assert out.stat().st_mode & 0o077 == 0
    before = json.loads(_gpuscope(nsys_env, "report", "--json", "--no-cache", export).stdout)
    after = json.loads(_gpuscope(nsys_env, "report", "--json", "--no-cache", str(out)).stdout)
    assert after["nvtx_summary"] == before["nvtx_summary"] and before["nvtx_summary"]
    assert [p["nvtx_ranges"] for p in after["processes"]] == [p["nvtx_ranges"] for p in before["processes"]]


def test_a_nsys_rep_alone_is_refused_with_one_line(tmp_path, run_env):
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"\0" * 64)
    res = subprocess.run([sys.executable, "-m", "gpuscope", "report", "--redact", str(tmp_path / "o.sqlite"),
                          str(rep)], env=run_env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "cannot be redacted" in res.stderr and len(res.stderr.splitlines()) == 1
