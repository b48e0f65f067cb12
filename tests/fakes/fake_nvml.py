"""FakeNvml: a TEST DOUBLE for the ``pynvml`` module (no GPU on the test machines).

It implements only the functions gpuscope.telemetry.gpu calls, with pynvml's signatures, and
raises pynvml's own error classes (``pynvml.NVMLError(code)``), so the backend's error mapping is
exercised exactly as with the real driver. Tests flip failures mid-run: ``unsupported`` (a
function answers NOT_SUPPORTED), ``lost`` (the GPU falls off the bus), ``no_permission``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml

NVMLError = pynvml.NVMLError
NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM


def _err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


@dataclass
class FakeGpu:
    """One fake device and the processes on it."""

    name: str = "Fake H100"
    uuid: str = "GPU-fake-0"
    util_gpu: int = 40
    util_mem: int = 20
    mem_used: int = 2 << 30
    mem_total: int = 80 << 30
    temperature: int = 55
    power_mw: int = 150_000
    sm_clock: int = 1980
    processes: dict[int, int | None] = field(default_factory=dict)     # pid -> used bytes
    sm_util: dict[int, int] = field(default_factory=dict)              # pid -> smUtil %
    unsupported: set[str] = field(default_factory=set)                 # function names
    no_permission: set[str] = field(default_factory=set)
    lost: bool = False


class FakeNvml:
    """Pass an instance where the code expects the ``pynvml`` module."""

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM

    def __init__(self, gpus: list[FakeGpu] | None = None, *, init_error: int | None = None,
                 driver: str = "999.99") -> None:
        self.gpus = list(gpus or [])
        self.init_error = init_error
        self.driver = driver
        self.calls: dict[str, int] = {}
        self.initialized = False

    # -- plumbing --------------------------------------------------------------------------

    def _enter(self, fn: str, handle: int | None = None) -> FakeGpu | None:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if not self.initialized:
            raise _err(pynvml.NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return None
        gpu = self.gpus[handle]
        if gpu.lost:
            raise _err(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.unsupported:
            raise _err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if fn in gpu.no_permission:
            raise _err(pynvml.NVML_ERROR_NO_PERMISSION)
        return gpu

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] = self.calls.get("nvmlInit", 0) + 1
        if self.init_error is not None:
            raise _err(self.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._enter("nvmlDeviceGetHandleByIndex")
        return index

    # -- device queries ---------------------------------------------------------------------

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._enter("nvmlDeviceGetName", h).name  # type: ignore[union-attr]

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._enter("nvmlDeviceGetUUID", h).uuid  # type: ignore[union-attr]

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        g = self._enter("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=g.util_gpu, memory=g.util_mem)  # type: ignore[union-attr]

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        g = self._enter("nvmlDeviceGetMemoryInfo", h)
        return SimpleNamespace(used=g.mem_used, total=g.mem_total,  # type: ignore[union-attr]
                               free=g.mem_total - g.mem_used)  # type: ignore[union-attr]

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._enter("nvmlDeviceGetTemperature", h).temperature  # type: ignore[union-attr]

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._enter("nvmlDeviceGetPowerUsage", h).power_mw  # type: ignore[union-attr]

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return self._enter("nvmlDeviceGetClockInfo", h).sm_clock  # type: ignore[union-attr]

    # -- processes --------------------------------------------------------------------------

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        g = self._enter("nvmlDeviceGetComputeRunningProcesses", h)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used)  # type: ignore[union-attr]
                for pid, used in g.processes.items()]  # type: ignore[union-attr]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        self._enter("nvmlDeviceGetGraphicsRunningProcesses", h)
        return []

    def nvmlDeviceGetProcessUtilization(self, h: int, since_us: int) -> list[SimpleNamespace]:
        g = self._enter("nvmlDeviceGetProcessUtilization", h)
        if not g.sm_util:  # type: ignore[union-attr]
            raise _err(pynvml.NVML_ERROR_NOT_FOUND)  # the driver's answer for "no samples"
        return [SimpleNamespace(pid=pid, timeStamp=since_us + 1, smUtil=u, memUtil=0)
                for pid, u in g.sm_util.items()]  # type: ignore[union-attr]
