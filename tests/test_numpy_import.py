"""gpuscope's own processes load numpy with one OpenBLAS thread, and give the environment back.

Each case runs in a fresh interpreter (numpy loads once per process); the number of OpenBLAS
threads is read from /proc (threads of the process after the import).
"""

from __future__ import annotations

import os

import pytest

from tests.fresh_python import fresh_json

PROBE = r"""
import json, os, subprocess, sys
from gpuscope import numpy_import
before = dict(os.environ)
if sys.argv[1] == "preload":
    numpy_import.preload()
import numpy
child = subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                       capture_output=True, text=True, check=True).stdout
print(json.dumps({"threads": len(os.listdir("/proc/self/task")), "same_env": dict(os.environ) == before,
                  "child_env": json.loads(child)}))
"""


def _probe(mode: str, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    return fresh_json(PROBE, mode, env={**base, **env})


def test_preload_uses_one_blas_thread_and_leaves_the_environment_as_it_was():
    got = _probe("preload")
    assert got["threads"] == 1
    assert got["same_env"] and "OPENBLAS_NUM_THREADS" not in got["child_env"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS starts no extra thread anyway")
def test_without_preload_numpy_starts_a_thread_per_core():
    """The control: what preload saves (a plain import starts OpenBLAS's pool)."""
    assert _probe("plain")["threads"] > 1


def test_a_users_own_setting_is_kept():
    got = _probe("preload", OPENBLAS_NUM_THREADS="2")
    assert got["threads"] == 2 and got["child_env"]["OPENBLAS_NUM_THREADS"] == "2" and got["same_env"]
