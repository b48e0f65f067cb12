"""The suite's own plugins, each in a real pytest run in a subprocess on a small tree.

tests/ci_skips.py: under CI=true a skip fails unless it is on the allow-list; elsewhere skips stay
(the tree's node ids mirror the suite's, so the real allow-list decides). tests/flaky.py: every
retry of an nsys step shows in the output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_TEST = """\
import pytest

def test_real_pynvml_here_has_no_gpu():
    pytest.skip("a GPU is present")

def test_another_gpu_test():
    pytest.skip("a GPU is present")      # same reason, but this test is not on the list
"""
TORCH_MODULE = """\
import pytest
torch = pytest.importorskip("gpuscope_no_such_module")

def test_ranks():
    assert torch
"""
PLAIN = """\
import pytest

def test_passes():
    assert 1 + 1 == 2

@pytest.fixture
def reaper():
    pytest.skip("cannot become a child subreaper here")

def test_needs_a_reaper(reaper):
    assert reaper
"""


def _tree(tmp: Path) -> Path:
    files = {"tests/telemetry/test_telemetry_gpu.py": GPU_TEST, "tests/runs/test_torchrun.py": TORCH_MODULE,
             "tests/cleanup/test_plain.py": PLAIN, "pytest.ini": "[pytest]\n"}
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return tmp


def _pytest(tmp: Path, ci: bool, plugin: str = "tests.ci_skips") -> tuple[dict[str, int], str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if ci:
        env["CI"] = "true"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-c", str(tmp / "pytest.ini"), "--rootdir", str(tmp),
                           "-p", plugin, "-p", "no:cacheprovider", "--continue-on-collection-errors", "-rA",
                           str(tmp / "tests")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    last = proc.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}
    return counts, proc.stdout


def test_under_ci_only_allow_listed_skips_pass(tmp_path):
    counts, out = _pytest(_tree(tmp_path), ci=True)
    assert counts == {"passed": 1, "skipped": 1, "failed": 1, "errors": 2}, out
    assert re.search(r"SKIPPED \[1\] \S*tests/telemetry/test_telemetry_gpu.py:\d+: a GPU is present", out), out
    assert re.search(r"FAILED \S*tests/telemetry/test_telemetry_gpu.py::test_another_gpu_test", out), out
    assert re.search(r"ERROR \S*tests/cleanup/test_plain.py::test_needs_a_reaper", out), out   # fixture skip
    assert re.search(r"ERROR \S*tests/runs/test_torchrun.py", out), out   # the module-level importorskip
    assert out.count("skipped under CI=true and not on the allow-list") >= 3, out
    assert "CI=true: 1 skip(s) on the allow-list" in out


def test_without_ci_skips_stay_skips(tmp_path):
    counts, out = _pytest(_tree(tmp_path), ci=False)
    assert counts == {"passed": 1, "skipped": 4}, out
    assert "allow-list" not in out


RETRYING = """\
from tests.flaky import known_flake, note_retry

def test_a_recording_retried_once():
    why = known_flake("...Agent launcher failed.")
    note_retry("nsys 2022.4 profile (attempt 1)", why)
    assert why == "nsys could not start its agent ('Agent launcher failed')"
"""


def test_every_retry_is_in_the_output(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_retrying.py").write_text(RETRYING)
    counts, out = _pytest(tmp_path, ci=False, plugin="tests.flaky")
    assert counts == {"passed": 1, "warning": 1}, out
    assert "NsysRetry: nsys 2022.4 profile (attempt 1): nsys could not start its agent" in out, out
    assert "nsys steps retried: 1" in out and "running it again" in out, out


def test_xdist_groups_reach_the_scheduler(request):
    """Under the README's `-n 3 --dist loadgroup`, the group tests/conftest.py gives a test is in
    the node id pytest-xdist schedules by. With pytest 9.2 it was not (pytest keeps node ids where
    pytest-xdist 3.8 cannot add the group), every group was silently ignored, and nsys tests ran
    side by side on their machine-wide lock; the test extras pin pytest below 9.2."""
    if not hasattr(request.config, "workerinput") or not request.config.getoption("loadgroup", False):
        pytest.skip("runs under pytest-xdist with --dist loadgroup (the README's test command)")
    assert request.node.nodeid.endswith("@test_suite_plugins.py"), request.node.nodeid
