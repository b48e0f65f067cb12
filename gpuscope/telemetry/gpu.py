"""GPU telemetry through NVML (``nvidia-ml-py``, imported as ``pynvml``), behind a small interface.

:func:`open_backend` returns an :class:`NvmlBackend` when NVML works and a :class:`NoGpuBackend`
otherwise; both answer ``devices()`` and ``processes()``. Every NVML call goes through
:meth:`NvmlBackend.query`, which turns an NVML error into ``None`` (not available) and records
each distinct reason once as a note. A missing metric is a value, never an exception, so no
driver, no GPU, no permission or a GPU lost in the middle of a run never stops the sampler.

The NVML module is injected (``NvmlBackend(nvml=...)``): tests pass ``tests/fakes/fake_nvml.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpuscope.telemetry import log

from typing import TYPE_CHECKING, NamedTuple
if TYPE_CHECKING:
    from typing import Any, Protocol


NO_GPU = "no NVIDIA GPU / driver"

# NVML error codes (as in pynvml): after these a query is not retried on that device.
_NOT_SUPPORTED, _NO_PERMISSION, _NOT_FOUND, _FUNCTION_NOT_FOUND, _GPU_IS_LOST = 3, 4, 6, 13, 15
_PERMANENT = (_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND)


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One GPU at one instant; ``None`` = not available on this device/driver."""

    index: int
    name: str | None
    uuid: str | None
    util_gpu: float | None
    util_mem: float | None
    mem_used: int | None
    mem_total: int | None
    temperature: float | None
    power_w: float | None
    sm_clock: int | None


class GpuProcessSample(NamedTuple):
    """One process on one GPU."""

    pid: int
    device_index: int
    used_memory_bytes: int | None
    sm_util: float | None


if TYPE_CHECKING:   # the interface of NoGpuBackend and NvmlBackend (type checkers only: typing stays off the run path)
    class GpuBackend(Protocol):
        """What the sampler, ``gpuscope monitor`` and cleanup need from a GPU source."""

        available: bool
        reason: str

        def devices(self) -> list[DeviceSample]: ...

        def processes(self) -> list[GpuProcessSample]: ...

        def take_notes(self) -> list[str]: ...

        def close(self) -> None: ...


class NoGpuBackend:
    """No NVML: empty answers and one reason line."""

    available = False

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self._told = False

    def devices(self) -> list[DeviceSample]:
        return []

    def processes(self) -> list[GpuProcessSample]:
        return []

    def take_notes(self) -> list[str]:
        """The reason, once."""
        if self._told:
            return []
        self._told = True
        return [self.reason]

    def close(self) -> None:
        pass


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlBackend:
    """NVML devices and GPU processes. ``available`` is False (with ``reason``) if init failed."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.available = False
        self.reason = ""
        self._notes: list[str] = []
        self._said: set[tuple[Any, ...]] = set()
        self._skip: set[tuple[int, str]] = set()   # (device, function) not to call again
        self._lost: set[int] = set()
        self._handles: list[Any] = []
        self._static: list[tuple[str | None, str | None]] = []
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            self.reason = f"{NO_GPU} (NVML: {exc})"
            return
        count = self.query(-1, "nvmlDeviceGetCount") or 0
        for i in range(count):
            handle = self.query(i, "nvmlDeviceGetHandleByIndex", i)
            self._handles.append(handle)
            self._static.append((_text(self.query(i, "nvmlDeviceGetName", handle)),
                                 _text(self.query(i, "nvmlDeviceGetUUID", handle))))
        if not self._handles:
            self.reason = f"{NO_GPU} (NVML found no devices)"
            self._shutdown()
            return
        self.available = True
        driver = _text(self.query(-1, "nvmlSystemGetDriverVersion"))
        self.reason = f"NVML: {count} GPU(s), driver {driver or 'unknown'}"

    # -- the one query helper -------------------------------------------------------------

    def query(self, device: int, fn_name: str, *args: Any) -> Any:
        """Call ``nvml.<fn_name>(*args)``; on an NVML error return None and note the reason once."""
        if (device, fn_name) in self._skip or device in self._lost:
            return None
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            self._skip.add((device, fn_name))
            self._note(("missing", fn_name), f"{fn_name} is not in this nvidia-ml-py; value not available")
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            self._failed(device, fn_name, exc)
            return None

    def _failed(self, device: int, fn_name: str, exc: Exception) -> None:
        text, code = str(exc), getattr(exc, "value", None)
        where = f"GPU {device}: " if device >= 0 else ""
        if code == _GPU_IS_LOST and device >= 0:
            self._lost.add(device)
            self._note(("lost", device), f"GPU {device} is lost: its values are not available")
        elif code in _PERMANENT:
            self._skip.add((device, fn_name))
            self._note((fn_name, text), f"{where}{_metric_of(fn_name)} not available ({fn_name}: {text})")
        else:
            self._note((device, fn_name, text), f"{where}{_metric_of(fn_name)} not available ({fn_name}: {text})")

    def _note(self, key: tuple[Any, ...], message: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        self._notes.append(message)
        log().info("%s", message)

    def take_notes(self) -> list[str]:
        """Reasons noted since the last call (each distinct reason appears once, ever)."""
        notes, self._notes = self._notes, []
        return notes

    # -- samples --------------------------------------------------------------------------

    def devices(self) -> list[DeviceSample]:
        """One sample per GPU; unavailable values are None."""
        return [self._device(i, h) for i, h in enumerate(self._handles)]

    def _device(self, i: int, h: Any) -> DeviceSample:
        nv, q = self.nvml, self.query
        util = q(i, "nvmlDeviceGetUtilizationRates", h)
        mem = q(i, "nvmlDeviceGetMemoryInfo", h)
        temp = q(i, "nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        power = q(i, "nvmlDeviceGetPowerUsage", h)
        clock = q(i, "nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))
        name, uuid = self._static[i]
        return DeviceSample(
            index=i, name=name, uuid=uuid,
            util_gpu=float(util.gpu) if util is not None else None,
            util_mem=float(util.memory) if util is not None else None,
            mem_used=int(mem.used) if mem is not None else None,
            mem_total=int(mem.total) if mem is not None else None,
            temperature=float(temp) if temp is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            sm_clock=int(clock) if clock is not None else None,
        )

    def processes(self) -> list[GpuProcessSample]:
        """Every process the driver lists on every GPU (compute and graphics), with SM util."""
        out: list[GpuProcessSample] = []
        for i, h in enumerate(self._handles):
            mem: dict[int, int | None] = {}
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                for p in self.query(i, fn, h) or ():
                    used = p.usedGpuMemory
                    prev = mem.get(p.pid)
                    mem[p.pid] = used if prev is None else max(prev, used or 0)
            util = self._process_util(i, h) if mem else {}
            out.extend(GpuProcessSample(pid, i, used, util.get(pid)) for pid, used in sorted(mem.items()))
        return out

    def _process_util(self, i: int, h: Any) -> dict[int, float]:
        """Latest SM utilization per pid over the last second (the driver samples every ~1/6 s)."""
        fn_name = "nvmlDeviceGetProcessUtilization"
        if (i, fn_name) in self._skip or i in self._lost:
            return {}
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            self.query(i, fn_name)   # notes "not in this nvidia-ml-py" once, and skips it from now on
            return {}
        since_us = time.time_ns() // 1000 - 1_000_000
        try:
            samples = fn(h, since_us)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) in (0, _NOT_FOUND):
                return {}   # no samples in the window: not a failure
            self._failed(i, fn_name, exc)
            return {}
        latest: dict[int, tuple[int, float]] = {}
        for s in samples:
            if s.pid not in latest or s.timeStamp >= latest[s.pid][0]:
                latest[s.pid] = (s.timeStamp, float(s.smUtil))
        return {pid: util for pid, (_, util) in latest.items()}

    def _shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def close(self) -> None:
        """Release NVML (safe to call twice)."""
        if self.available:
            self.available = False
            self._shutdown()


_METRIC_OF = {
    "nvmlDeviceGetUtilizationRates": "utilization",
    "nvmlDeviceGetMemoryInfo": "memory",
    "nvmlDeviceGetTemperature": "temperature",
    "nvmlDeviceGetPowerUsage": "power",
    "nvmlDeviceGetClockInfo": "SM clock",
    "nvmlDeviceGetComputeRunningProcesses": "per-process memory",
    "nvmlDeviceGetGraphicsRunningProcesses": "per-process memory (graphics)",
    "nvmlDeviceGetProcessUtilization": "per-process SM utilization",
    "nvmlDeviceGetName": "name",
    "nvmlDeviceGetUUID": "uuid",
}


def _metric_of(fn_name: str) -> str:
    return _METRIC_OF.get(fn_name, fn_name)


def _library_missing() -> str | None:
    """pynvml's own words when the NVML library cannot be loaded here (Linux: the ``CDLL`` pynvml
    itself tries first), without importing pynvml (a costly import for ``gpuscope run`` on a machine
    without the driver); None when it loads, or elsewhere than Linux (pynvml decides)."""
    import sys

    if not sys.platform.startswith("linux") or "pynvml" in sys.modules:
        return None
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return "NVML Shared Library Not Found"     # str(pynvml.NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND))
    return None


def open_backend(nvml: Any = None) -> GpuBackend:
    """NVML when it works here, else a :class:`NoGpuBackend` whose ``reason`` says why in one line."""
    if nvml is None:
        missing = _library_missing()
        if missing:
            return NoGpuBackend(f"{NO_GPU} (NVML: {missing})")
        try:
            import pynvml
        except ImportError as exc:
            return NoGpuBackend(f"{NO_GPU} (nvidia-ml-py is not installed: {exc})")
        nvml = pynvml
    backend = NvmlBackend(nvml)
    if not backend.available:
        return NoGpuBackend(backend.reason)
    return backend
