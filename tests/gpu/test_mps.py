"""MPS detection: real processes named as MPS's, a real FIFO as its control pipe, and NVML's compute
mode through the fake NVML (the one test double: no GPU here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pynvml
import pytest

from gpuscope.gpu import mps
from gpuscope.telemetry.gpu import open_backend
from tests.fakes.fake_nvml import FakeGpu, FakeNvml


class FakeNvmlWithComputeMode(FakeNvml):
    """TEST DOUBLE: the fake NVML plus nvmlDeviceGetComputeMode (per GPU, from ``modes``)."""

    def __init__(self, gpus: list[FakeGpu], modes: list[int]) -> None:
        super().__init__(gpus)
        self.modes = modes

    def nvmlDeviceGetComputeMode(self, h: int) -> int:  # noqa: N802 - pynvml's name
        self._enter("nvmlDeviceGetComputeMode", h)
        return self.modes[h]


@pytest.fixture
def mps_like(tmp_path):
    """Two real processes whose executables are named as MPS's daemon and server (copies of sleep)."""
    started = []
    for name in (mps.CONTROL, mps.SERVER):
        exe = tmp_path / name
        shutil.copy(shutil.which("sleep"), exe)
        started.append(subprocess.Popen([str(exe), "60"]))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(mps.procs.read(p.pid) is None or
                                              mps.procs.read(p.pid).comm != mps.CONTROL[:15] for p in started):
        time.sleep(0.02)   # until each has exec'd: its name is then the copy's
    yield [p.pid for p in started]
    for p in started:
        p.kill()
        p.wait()


def test_mps_processes_are_found_by_name(mps_like, tmp_path):
    control, server = mps_like
    state = mps.detect(pipe_dir=str(tmp_path / "none"))
    assert control in state.control_pids and server in state.server_pids
    assert state.active
    assert f"{mps.CONTROL} pid" in state.describe() and state.describe().startswith("MPS is on")


def test_a_control_pipe_alone_says_mps_is_on(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert mps.control_pipe() is None
    (tmp_path / "control").write_text("")          # a plain file is not the daemon's pipe
    assert mps.control_pipe() is None
    os.unlink(tmp_path / "control")
    os.mkfifo(tmp_path / "control")
    assert mps.control_pipe() == str(tmp_path / "control")
    state = mps.detect()
    assert state.active and "control pipe" in state.describe()


def test_mps_off_and_compute_modes_from_nvml(tmp_path):
    fake = FakeNvmlWithComputeMode([FakeGpu(), FakeGpu(uuid="GPU-fake-1")],
                                   [pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, pynvml.NVML_COMPUTEMODE_DEFAULT])
    backend = open_backend(fake)
    state = mps.detect(backend, pipe_dir=str(tmp_path))
    assert state.compute_modes == {0: "exclusive-process", 1: "default"}
    if not state.control_pids and not state.server_pids:     # no MPS on the test machine
        assert not state.active
        assert state.describe() == ("MPS is off (no nvidia-cuda-mps-control process, no control pipe); "
                                    "compute mode: GPU 0 exclusive-process, GPU 1 default")
    assert state.to_dict()["compute_modes"] == {"0": "exclusive-process", "1": "default"}


def test_an_nvml_without_compute_mode_gives_no_modes():
    backend = open_backend(FakeNvml([FakeGpu()]))       # the plain fake has no nvmlDeviceGetComputeMode
    assert mps.compute_modes(backend) == {}
    assert mps.compute_modes(None) == {}
