"""Every telemetry metric, declared once: key, label, unit and description.

The CLI headers, the JSON field names, the store columns and (later) the app's axis labels all
come from this table (STYLE practice 8). A sample dataclass has one attribute per metric key of
its kind, so code can walk the table instead of naming fields again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One measured quantity."""

    key: str          # attribute of the sample dataclass, JSON field, store column
    kind: str         # host | gpu | proc | gpu_proc | torch
    label: str        # short label for headers and axes
    unit: str         # "%", "B", "C", "W", "MHz", "" (count) or "state"
    description: str
    history: bool = True  # plotted over time (False: shown as current value only)


METRICS: tuple[Metric, ...] = (
    # host
    Metric("cpu", "host", "CPU", "%", "host CPU use, mean over all cores"),
    Metric("cores", "host", "CPU per core", "%", "CPU use of each core", history=True),
    Metric("mem_used", "host", "memory used", "B", "host memory in use (total - available)"),
    Metric("mem_total", "host", "memory total", "B", "host memory", history=False),
    Metric("swap_used", "host", "swap used", "B", "swap in use"),
    Metric("swap_total", "host", "swap total", "B", "swap size", history=False),
    # one GPU
    Metric("util_gpu", "gpu", "GPU util", "%", "time a kernel was running (NVML utilization.gpu)"),
    Metric("util_mem", "gpu", "mem util", "%", "time device memory was read or written"),
    Metric("mem_used", "gpu", "GPU mem used", "B", "device memory in use (all processes)"),
    Metric("mem_total", "gpu", "GPU mem total", "B", "device memory", history=False),
    Metric("temperature", "gpu", "temp", "C", "GPU core temperature"),
    Metric("power_w", "gpu", "power", "W", "board power draw"),
    Metric("sm_clock", "gpu", "SM clock", "MHz", "streaming multiprocessor clock"),
    # one process of the tree (or of the host, for GPU processes in monitor)
    Metric("state", "proc", "state", "state", "R running, S sleeping, D disk wait, Z zombie, T stopped"),
    Metric("cpu", "proc", "CPU", "%", "CPU use of the process (100 = one core)"),
    Metric("rss", "proc", "RSS", "B", "resident memory"),
    Metric("uss", "proc", "USS", "B", "memory only this process holds (optional, costly)"),
    Metric("threads", "proc", "threads", "", "number of threads"),
    Metric("gpu_mem", "proc", "GPU mem", "B", "device memory the driver accounts to the process, all GPUs"),
    Metric("sm_util", "proc", "SM util", "%", "the process's share of SM time (where the driver offers it)"),
    # one process on one GPU
    Metric("used_memory_bytes", "gpu_proc", "GPU mem", "B", "device memory of the process on this GPU"),
    Metric("sm_util", "gpu_proc", "SM util", "%", "SM utilization of the process on this GPU"),
    # torch caching allocator, reported from inside the process
    Metric("allocated", "torch", "allocated", "B", "torch.cuda.memory_allocated: memory held by tensors"),
    Metric("reserved", "torch", "reserved", "B", "torch.cuda.memory_reserved: memory the allocator holds"),
    Metric("max_allocated", "torch", "peak allocated", "B", "torch.cuda.max_memory_allocated"),
)


def of_kind(kind: str) -> tuple[Metric, ...]:
    """The metrics of one kind, in declaration order."""
    return tuple(m for m in METRICS if m.kind == kind)


def get(kind: str, key: str) -> Metric:
    """One metric by kind and key (KeyError if undeclared)."""
    for m in METRICS:
        if m.kind == kind and m.key == key:
            return m
    raise KeyError(f"{kind}.{key}")
