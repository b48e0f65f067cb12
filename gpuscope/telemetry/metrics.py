"""Every telemetry metric, declared once: key, label, unit and description.

The CLI headers, the JSON field names, the store columns and (later) the app's axis labels all
come from this table. A sample record has one attribute per metric key of
its kind, so code can walk the table instead of naming fields again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One measured quantity."""

    key: str          # attribute of the sample record, JSON field, store column
    kind: str         # host | gpu | proc | gpu_proc | torch
    label: str        # short label for headers and axes
    unit: str         # "%", "B", "C", "W", "MHz", "" (count) or "state"
    description: str
    short: str = ""       # column header in `gpuscope monitor` ("" = not a column)
    history: bool = True  # plotted over time (False: shown as current value only)


METRICS: tuple[Metric, ...] = (
    # host
    Metric("cpu", "host", "CPU", "%", "host CPU use, mean over all cores", "cpu%"),
    Metric("cores", "host", "CPU per core", "%", "CPU use of each core"),
    Metric("mem_used", "host", "memory used", "B", "host memory in use (total - available)", "memMiB"),
    Metric("mem_total", "host", "memory total", "B", "host memory", "totMiB", history=False),
    Metric("swap_used", "host", "swap used", "B", "swap in use", "swapMiB"),
    Metric("swap_total", "host", "swap total", "B", "swap size", history=False),
    # one GPU
    Metric("util_gpu", "gpu", "GPU util", "%", "time a kernel was running (NVML utilization.gpu)", "sm%"),
    Metric("util_mem", "gpu", "mem util", "%", "time device memory was read or written", "mem%"),
    Metric("mem_used", "gpu", "GPU mem used", "B", "device memory in use (all processes)", "fbMiB"),
    Metric("mem_total", "gpu", "GPU mem total", "B", "device memory", "totMiB", history=False),
    Metric("temperature", "gpu", "temperature", "C", "GPU core temperature", "tempC"),
    Metric("power_w", "gpu", "power", "W", "board power draw", "pwrW"),
    Metric("sm_clock", "gpu", "SM clock", "MHz", "streaming multiprocessor clock", "sclkMHz"),
    # one process of the tree (or, in `monitor` without --pid, a GPU process of the host)
    Metric("state", "proc", "state", "state", "R running, S sleeping, D disk wait, Z zombie, T stopped", "st"),
    Metric("cpu", "proc", "CPU", "%", "CPU use of the process (100 = one core)", "cpu%"),
    Metric("rss", "proc", "RSS", "B", "resident memory", "rssMiB"),
    Metric("uss", "proc", "USS", "B", "memory only this process holds (optional, costly)", "ussMiB"),
    Metric("threads", "proc", "threads", "", "number of threads", "thr"),
    Metric("gpu_mem", "proc", "GPU mem", "B", "device memory the driver accounts to the process, all GPUs", "fbMiB"),
    Metric("sm_util", "proc", "SM util", "%",
           "the process's share of SM time, highest of its GPUs (where the driver offers it)", "sm%"),
    # one process on one GPU
    Metric("used_memory_bytes", "gpu_proc", "GPU mem", "B", "device memory of the process on this GPU", "fbMiB"),
    Metric("sm_util", "gpu_proc", "SM util", "%", "SM utilization of the process on this GPU", "sm%"),
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
