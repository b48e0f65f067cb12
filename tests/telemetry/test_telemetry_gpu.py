"""The NVML backend driven by the FakeNvml test double (no GPU here), and open_backend without one."""

from __future__ import annotations

import subprocess
import sys
import time

import pynvml
import pytest

from fakes.fake_nvml import FakeGpu, FakeNvml
from gpuscope.telemetry.gpu import NoGpuBackend, NvmlBackend, open_backend
from gpuscope.telemetry.sampler import RunSampler, Sampler
from tests.fresh_python import fresh_json


def two_gpus() -> FakeNvml:
    return FakeNvml([FakeGpu(), FakeGpu(name="Fake A100", uuid="GPU-fake-1", util_gpu=90)])


def test_devices_report_every_metric():
    b = NvmlBackend(two_gpus())
    assert b.available and "2 GPU(s)" in b.reason
    d0, d1 = b.devices()
    assert (d0.name, d0.uuid, d0.util_gpu, d0.util_mem) == ("Fake H100", "GPU-fake-0", 40.0, 20.0)
    assert (d0.mem_used, d0.mem_total, d0.temperature, d0.power_w, d0.sm_clock) == \
        (2 << 30, 80 << 30, 55.0, 150.0, 1980)
    assert d1.util_gpu == 90.0 and d1.name == "Fake A100"
    assert b.take_notes() == []


def test_not_supported_is_none_and_said_once_and_not_retried():
    nv = two_gpus()
    for g in nv.gpus:
        g.unsupported.add("nvmlDeviceGetPowerUsage")
    b = NvmlBackend(nv)
    for _ in range(5):
        assert [d.power_w for d in b.devices()] == [None, None]
        assert b.devices()[0].temperature == 55.0
    notes = b.take_notes()
    assert len(notes) == 1 and "power not available" in notes[0] and "Not Supported" in notes[0]
    assert nv.calls["nvmlDeviceGetPowerUsage"] == 2   # once per device, then skipped
    assert b.take_notes() == []


def test_gpu_lost_mid_run_keeps_sampling_other_gpu():
    nv = two_gpus()
    b = NvmlBackend(nv)
    assert b.devices()[0].util_gpu == 40.0
    nv.gpus[0].lost = True
    nv.gpus[0].processes[123] = 1 << 20
    for _ in range(3):
        d0, d1 = b.devices()
        assert d0.util_gpu is None and d0.mem_used is None and d0.name == "Fake H100"
        assert d1.util_gpu == 90.0
        assert b.processes() == []
    assert b.take_notes() == ["GPU 0 is lost: its values are not available"]


def test_no_permission_and_transient_errors_are_values():
    nv = two_gpus()
    nv.gpus[1].no_permission.add("nvmlDeviceGetComputeRunningProcesses")
    nv.gpus[0].processes = {4242: 3 << 20, 4243: None}
    nv.gpus[0].sm_util = {4242: 37}
    b = NvmlBackend(nv)
    procs = b.processes()
    assert [(p.pid, p.device_index, p.used_memory_bytes, p.sm_util) for p in procs] == [
        (4242, 0, 3 << 20, 37.0), (4243, 0, None, None)]
    notes = b.take_notes()
    assert len(notes) == 1 and "GPU 1: per-process memory not available" in notes[0]
    assert "Insufficient Permissions" in notes[0]


def test_process_utilization_not_found_means_no_samples_not_an_error():
    nv = two_gpus()
    nv.gpus[0].processes = {77: 1 << 20}
    b = NvmlBackend(nv)
    assert b.processes()[0].sm_util is None
    assert b.take_notes() == []


def test_init_failure_gives_none_backend_with_one_line_reason():
    b = open_backend(FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert isinstance(b, NoGpuBackend) and not b.available
    assert b.reason == "no NVIDIA GPU / driver (NVML: Driver Not Loaded)"
    assert b.devices() == [] and b.processes() == []
    assert b.take_notes() == [b.reason] and b.take_notes() == []
    assert not open_backend(FakeNvml([])).available


def test_real_pynvml_here_has_no_gpu():
    b = open_backend()
    if b.available:  # pragma: no cover - a GPU machine
        pytest.skip("a GPU is present")
    assert b.reason.startswith("no NVIDIA GPU / driver (") and "\n" not in b.reason


def test_run_sampler_maps_gpu_processes_to_the_tree_and_survives_gpu_loss():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        nv = two_gpus()
        nv.gpus[0].processes = {child.pid: 500 << 20, 1: 7 << 20}   # pid 1 is not in the tree
        nv.gpus[1].processes = {child.pid: 100 << 20}
        nv.gpus[1].sm_util = {child.pid: 12}
        s = RunSampler(child.pid, 0.05, gpu=NvmlBackend(nv))
        b1 = s.sample_once()
        assert sorted((g.pid, g.device_index) for g in b1.gpu_processes) == [(child.pid, 0), (child.pid, 1)]
        (p,) = b1.processes
        assert p.gpu_mem == 600 << 20 and p.sm_util == 12.0  # memory summed, SM util the highest
        nv.gpus[0].processes[child.pid] = 900 << 20
        s.sample_once()
        nv.gpus[0].lost = True
        b3 = s.sample_once()
        assert b3.devices[0].util_gpu is None and b3.processes[0].gpu_mem == 100 << 20
        assert b3.notes == ("GPU 0 is lost: its values are not available",)
        assert s.process_summary()[child.pid]["peak_gpu_mem_bytes"] == 1000 << 20
    finally:
        child.kill()
        child.wait()


def _wait_ticks(seen: list, n: int, deadline_s: float = 60.0) -> None:
    """Wait until ``n`` more ticks have been delivered (a generous deadline: the machine may be busy)."""
    target = len(seen) + n
    end = time.monotonic() + deadline_s
    while len(seen) < target and time.monotonic() < end:
        time.sleep(0.01)
    assert len(seen) >= target, f"only {len(seen)} of {target} ticks in {deadline_s} s"


def test_sampler_thread_survives_nvml_failures():
    nv = two_gpus()
    s = Sampler(0.02, gpu=NvmlBackend(nv), host=False)
    seen = []
    s.add_listener(seen.append)
    s.start()
    _wait_ticks(seen, 4)
    before = len(seen)
    assert all(b.devices[0].util_gpu == 40.0 and b.devices[1].util_gpu == 90.0 for b in seen[:before])
    nv.gpus[1].lost = True
    nv.gpus[0].unsupported.add("nvmlDeviceGetUtilizationRates")
    _wait_ticks(seen, 4)                     # the thread keeps ticking through the failures
    s.stop()
    assert s.running is False
    after = seen[before + 1:]                # the tick in flight while flipping may be either
    assert len(after) >= 3
    assert all(b.devices[0].util_gpu is None and b.devices[0].mem_used == 2 << 30 for b in after)
    assert all(b.devices[1].util_gpu is None and b.devices[1].mem_used is None for b in after)
    notes = [n for b in seen for n in b.notes]
    assert sorted(notes) == sorted(["GPU 1 is lost: its values are not available",
                                    "GPU 0: utilization not available (nvmlDeviceGetUtilizationRates: Not Supported)"])


def test_a_function_missing_from_the_binding_is_noted_once():
    nv = two_gpus()
    nv.gpus[0].processes = {99: 1 << 20}
    nv.gpus[0].sm_util = {99: 50}
    nv.nvmlDeviceGetProcessUtilization = None      # an older nvidia-ml-py without it
    b = NvmlBackend(nv)
    for _ in range(3):
        assert [(p.pid, p.used_memory_bytes, p.sm_util) for p in b.processes()] == [(99, 1 << 20, None)]
    assert b.take_notes() == ["nvmlDeviceGetProcessUtilization is not in this nvidia-ml-py; value not available"]


def test_without_the_nvml_library_pynvml_is_not_imported_and_the_reason_is_pynvmls():
    """``gpuscope run`` on a machine without the driver (issue 14.4): the library is tried the way
    pynvml tries it, pynvml (~10 ms) is not imported, and the reason reads as pynvml's own."""
    code = ("import sys, json\n"
            "from gpuscope.telemetry.gpu import open_backend\n"
            "b = open_backend()\n"
            "print(json.dumps([b.available, b.reason, 'pynvml' in sys.modules]))\n")
    available, reason, imported = fresh_json(code)
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:          # this machine: no driver
        assert not available and not imported
        assert reason == NvmlBackend(pynvml).reason        # the same line as through pynvml
    else:                    # a GPU machine: pynvml is used as before
        assert imported
