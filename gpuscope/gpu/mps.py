"""Is NVIDIA MPS (Multi-Process Service) on? Its processes, its control pipe, and NVML compute modes.

With MPS the kernels of several processes can run on one GPU at once (one shared context run by
``nvidia-cuda-mps-server``); without it the GPU time-slices between the processes' contexts.
Signs, each reported with what it means (docs/GPU-SHARING.md):

- an ``nvidia-cuda-mps-control`` daemon (and, once a client connected, ``nvidia-cuda-mps-server``);
- the daemon's ``control`` pipe in ``$CUDA_MPS_PIPE_DIRECTORY`` (default ``/tmp/nvidia-mps``): a
  daemon outside this PID namespace (a container) is seen only this way;
- NVML compute mode per GPU: ``exclusive-process`` is the usual setting beside MPS (only the MPS
  server then holds a context); without MPS it lets one process at a time use the GPU.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from gpuscope.procs import read as procs

DEFAULT_PIPE_DIR = "/tmp/nvidia-mps"
CONTROL, SERVER = "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"
_COMM = CONTROL[:15]          # the kernel keeps 15 characters of a process name: both share it
COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}


@dataclass(frozen=True)
class MpsState:
    """What was seen: the MPS processes, the control pipe, and each GPU's compute mode."""

    control_pids: tuple[int, ...] = ()
    server_pids: tuple[int, ...] = ()
    pipe: str | None = None                       # the control pipe found, if any
    compute_modes: dict[int, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.control_pids or self.server_pids or self.pipe)

    def describe(self) -> str:
        """One line for a finding or a check."""
        modes = ", ".join(f"GPU {d} {m}" for d, m in sorted(self.compute_modes.items()))
        tail = f"; compute mode: {modes}" if modes else ""
        if not self.active:
            return f"MPS is off (no {CONTROL} process, no control pipe){tail}"
        seen = [f"{CONTROL} pid {', '.join(map(str, self.control_pids))}" if self.control_pids else "",
                f"{SERVER} pid {', '.join(map(str, self.server_pids))}" if self.server_pids else "",
                f"control pipe {self.pipe}" if self.pipe else ""]
        return "MPS is on (" + "; ".join(s for s in seen if s) + ")" + tail

    def to_dict(self) -> dict[str, Any]:
        return {"active": self.active, "control_pids": list(self.control_pids),
                "server_pids": list(self.server_pids), "pipe": self.pipe,
                "compute_modes": {str(k): v for k, v in self.compute_modes.items()}}


def detect(backend: Any = None, pipe_dir: str | None = None) -> MpsState:
    """MPS as seen now. ``backend``: an open :mod:`gpuscope.telemetry.gpu` backend for the compute
    modes (none: not asked); ``pipe_dir``: where the control pipe lives (default: as CUDA finds it)."""
    control, server = mps_processes()
    return MpsState(tuple(control), tuple(server), control_pipe(pipe_dir), compute_modes(backend))


def mps_processes() -> tuple[list[int], list[int]]:
    """(control daemon pids, server pids) among this PID namespace's processes."""
    control, server = [], []
    for pid, info in sorted(procs.snapshot().items()):
        if info.comm != _COMM or info.is_zombie:
            continue
        argv0 = os.path.basename((procs.cmdline(pid) or ("",))[0])
        if argv0 == CONTROL:
            control.append(pid)
        elif argv0 == SERVER:
            server.append(pid)
    return control, server


def control_pipe(pipe_dir: str | None = None) -> str | None:
    """The MPS control pipe (a FIFO named ``control``), or None."""
    folder = pipe_dir or os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_PIPE_DIR
    path = os.path.join(folder, "control")
    try:
        return path if stat.S_ISFIFO(os.stat(path).st_mode) else None
    except OSError:
        return None


def compute_modes(backend: Any) -> dict[int, str]:
    """NVML compute mode per GPU through the telemetry backend's one query helper ({} without NVML)."""
    if backend is None or not getattr(backend, "available", False):
        return {}
    out = {}
    count = backend.query(-1, "nvmlDeviceGetCount") or 0
    for i in range(count):
        handle = backend.query(i, "nvmlDeviceGetHandleByIndex", i)
        mode = backend.query(i, "nvmlDeviceGetComputeMode", handle) if handle is not None else None
        if mode is not None:
            out[i] = COMPUTE_MODES.get(int(mode), f"mode {mode}")
    return out
