"""The one check of ``--interval`` and ``--duration`` that ``gpuscope monitor`` and ``attach`` share."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.telemetry.sampler import check_timing


def test_timing_is_checked_interval_first():
    assert check_timing(0.5, None) == 0.5 and check_timing(1, 3.0) == 1.0
    with pytest.raises(ValueError, match="sampling interval"):
        check_timing(5.0, -1.0)
    with pytest.raises(ValueError, match="--duration must be more than 0"):
        check_timing(0.5, 0.0)


@pytest.mark.parametrize("argv", [["monitor", "--duration", "0"], ["attach", "1", "--duration", "-1"]])
def test_both_commands_refuse_in_one_line(argv, gpuscope_home):
    res = subprocess.run([sys.executable, "-m", "gpuscope", *argv], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["gpuscope: error: --duration must be more than 0 seconds"]
