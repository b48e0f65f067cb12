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
    out = exitstatus.usage()
    assert {"cpu_user_s", "cpu_system_s", "maxrss_kib", "hwm_kib"} <= out.keys(), out
    assert out["hwm_kib"] > 1024 and out["cpu_user_s"] > 0, out
