"""The exit record's own figures (gpuscope.inject.exitstatus): peak RSS as /proc/self/status says it."""

from __future__ import annotations

import os

import pytest

from gpuscope.inject import exitstatus


def _status_hwm() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


@pytest.mark.parametrize("size", [4096, 7, 1])
def test_peak_rss_is_the_status_files_vmhwm_however_the_reads_come(size, monkeypatch):
    """``VmHWM`` read with ``os.read``: whole in one read as the kernel gives it, or in pieces."""
    real = os.read
    monkeypatch.setattr(exitstatus.os, "read", lambda fd, n: real(fd, min(n, size)))
    got = exitstatus._vm_hwm_kib()
    assert got is not None and abs(got - _status_hwm()) <= 1024, got   # the peak may grow a little between


def test_usage_has_the_exact_figures():
    import time

    before = time.process_time()
    out = exitstatus.usage()
    after = time.process_time()
    assert {"cpu_s", "cpu_user_s", "cpu_system_s", "hwm_kib"} <= out.keys(), out
    assert before <= out["cpu_s"] <= after + 1e-6, (before, out, after)   # the process's own CPU clock
    assert out["hwm_kib"] > 1024 and out["cpu_user_s"] > 0, out
    # the split comes at the 10 ms clock tick: never more than the total, at most two ticks less
    assert out["cpu_s"] - 0.02 - 1e-6 <= out["cpu_user_s"] + out["cpu_system_s"] <= out["cpu_s"] + 0.01, out


def test_exit_loads_no_module(tmp_path):
    """The exit record's figures come from os and time (loaded anyway): importing ``resource``
    cost ~0.4 ms of every process's exit."""
    import subprocess
    import sys

    code = ("import sys; from gpuscope.inject import exitstatus; before = set(sys.modules); "
            "exitstatus.usage(); print(sorted(set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out
