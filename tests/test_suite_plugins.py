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


def _pytest(tmp: Path, ci: bool, plugin: str = "tests.ci_skips", *more: str) -> tuple[dict[str, int], str]:
    counts, out, _ = _pytest_run(tmp, ci, plugin, *more)
    return counts, out


def _pytest_run(tmp: Path, ci: bool, plugin: str, *more: str) -> tuple[dict[str, int], str, int]:
    """(outcome counts of the last line, stdout, exit code) of a real pytest on ``tmp/tests``."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if ci:
        env["CI"] = "true"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-c", str(tmp / "pytest.ini"), "--rootdir", str(tmp),
                           "-p", plugin, "-p", "no:cacheprovider", "--continue-on-collection-errors", "-rA",
                           *more, str(tmp / "tests")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    last = proc.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}
    return counts, proc.stdout, proc.returncode


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


def _retrying_tree(tmp: Path, files: int, retries_each: int) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "pytest.ini").write_text("[pytest]\n")
    for i in range(files):
        path = tmp / "tests" / f"test_retrying_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("from tests.flaky import known_flake, note_retry\n\n"
                        f"def test_recorded_{i}():\n"
                        f"    for k in range({retries_each}):\n"
                        f"        note_retry(f'step {i}.{{k}} (attempt 1)', known_flake('Agent launcher failed'))\n")
    return tmp


def test_retries_and_allowed_skips_reach_the_summary_under_xdist(tmp_path):
    """Under the README's `-n 3` each worker's retries and allowed skips reach the controller's summary
    (before, the summary printed nothing for retries and 0 allowed skips)."""
    tree = _retrying_tree(_tree(tmp_path), files=2, retries_each=1)
    counts, out, code = _pytest_run(tree, True, "tests.ci_skips", "-p", "tests.flaky", "-p", "xdist.plugin",
                                    "-n", "2")
    assert "2 workers" in out or "created: 2/2 workers" in out, out
    assert counts["passed"] == 3 and counts["skipped"] == 1, out
    assert "nsys steps retried: 2" in out and "step 0.0 (attempt 1)" in out and "step 1.0 (attempt 1)" in out, out
    assert "over the budget" not in out and code == 1, out    # 1: the tree's own failures (not-allowed skips)
    assert "CI=true: 1 skip(s) on the allow-list" in out, out
    assert re.search(r"tests/telemetry/test_telemetry_gpu.py::test_real_pynvml_here_has_no_gpu: a GPU is present",
                     out), out


def test_more_retries_than_the_budget_fail_the_run(tmp_path):
    from tests.flaky import RETRY_BUDGET

    within = _retrying_tree(tmp_path / "within", files=1, retries_each=RETRY_BUDGET)
    counts, out, code = _pytest_run(within, False, "tests.flaky", "-p", "xdist.plugin", "-n", "2")
    assert counts["passed"] == 1 and code == 0, out
    assert re.search(rf"nsys steps retried: {RETRY_BUDGET} -", out), out
    over = _retrying_tree(tmp_path / "over", files=2, retries_each=RETRY_BUDGET // 2 + 1)
    for more in ((), ("-p", "xdist.plugin", "-n", "2")):
        counts, out, code = _pytest_run(over, False, "tests.flaky", *more)
        assert counts["passed"] == 2 and code == 1, (more, out)   # every test passed, the run failed
        assert re.search(rf"nsys steps retried: {2 * (RETRY_BUDGET // 2 + 1)} \(over the budget of "
                         rf"{RETRY_BUDGET}: the run fails\)", out), out


def test_xdist_groups_reach_the_scheduler(request):
    """Under the README's `-n 3 --dist loadgroup`, the group tests/conftest.py gives a test is in
    the node id pytest-xdist schedules by. With pytest 9.2 it was not (pytest keeps node ids where
    pytest-xdist 3.8 cannot add the group), every group was silently ignored, and nsys tests ran
    side by side on their machine-wide lock; the test extras pin pytest below 9.2."""
    if not hasattr(request.config, "workerinput") or not request.config.getoption("loadgroup", False):
        pytest.skip("runs under pytest-xdist with --dist loadgroup (the README's test command)")
    assert request.node.nodeid.endswith("@test_suite_plugins.py"), request.node.nodeid
