"""SYNTHETIC Kineto traces with CUDA activity, for the CUDA paths no GPU here can record.

The schema follows what Kineto writes for a CUDA run (torch 2.x ``export_chrome_trace``): CPU ops
(``cpu_op``) with ``External id``; runtime calls (``cuda_runtime``: ``cudaLaunchKernel``,
``cudaStreamSynchronize``...) with ``External id``, ``cbid``, ``correlation``; GPU kernels
(``kernel``, pid = device, tid = stream) with ``External id``, ``device``, ``stream``,
``correlation``; ``ac2g`` flow events between them; ``ProfilerStep#N`` user annotations. Times and
names are made up; nothing here was recorded on a GPU.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

PID, TID, BASE_NS = 4242, 4242, 1_790_857_026_000_000_000


class _Builder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.ext = 0
        self.corr = 0

    def cpu(self, name: str, ts: float, dur: float, cat: str = "cpu_op", **args: Any) -> int:
        self.ext += 1
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                            "args": {"External id": self.ext, "Record function id": 0, **args}})
        return self.ext

    def launch(self, ext: int, ts: float, kernel_ts: float, kernel_us: float, name: str = "void gemm_kernel<>()",
               runtime: str = "cudaLaunchKernel") -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": runtime, "pid": PID, "tid": TID, "ts": ts,
                            "dur": 3.0, "args": {"External id": ext, "cbid": 211, "correlation": self.corr}})
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": kernel_ts,
                            "dur": kernel_us, "args": {"External id": ext, "queued": 0, "device": 0, "context": 1,
                                                       "stream": 7, "correlation": self.corr,
                                                       "grid": [1, 1, 1], "block": [128, 1, 1]}})
        self.events.append({"ph": "s", "id": self.corr, "pid": PID, "tid": TID, "ts": ts, "cat": "ac2g",
                            "name": "ac2g"})
        self.events.append({"ph": "f", "id": self.corr, "pid": 0, "tid": 7, "ts": kernel_ts, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})

    def runtime(self, name: str, ts: float, dur: float, ext: int) -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": TID, "ts": ts,
                            "dur": dur, "args": {"External id": ext, "cbid": 131, "correlation": self.corr}})


def make_trace(path: Path, *, steps: int = 4, kernels: int = 30, kernel_us: float = 5.0, gap_us: float = 40.0,
               sync: bool = False) -> dict[str, float]:
    """Write a one-rank CUDA trace: each step runs ``kernels`` aten::linear -> aten::mm ->
    cudaLaunchKernel -> kernel, the GPU idle ``gap_us`` between kernels; with ``sync`` each step
    ends in ``.item()`` (aten::item -> aten::_local_scalar_dense -> cudaMemcpyAsync +
    cudaStreamSynchronize). Returns the figures a test checks against."""
    b = _Builder()
    t = 1000.0
    per_kernel = max(kernel_us + gap_us, 10.0)
    for n in range(steps):
        step_dur = kernels * per_kernel + (300.0 if sync else 50.0)
        b.cpu(f"ProfilerStep#{n}", t, step_dur, cat="user_annotation")
        at = t + 5.0
        for _ in range(kernels):
            b.cpu("aten::linear", at, per_kernel - 2.0)
            mm = b.cpu("aten::mm", at + 1.0, per_kernel - 4.0)
            b.launch(mm, at + 2.0, at + 6.0, kernel_us)
            at += per_kernel
        if sync:
            item = b.cpu("aten::item", at + 5.0, 250.0)
            scalar = b.cpu("aten::_local_scalar_dense", at + 6.0, 248.0)
            b.launch(scalar, at + 7.0, at + 12.0, 1.5, name="Memcpy DtoH (Device -> Pageable)",
                     runtime="cudaMemcpyAsync")
            b.runtime("cudaStreamSynchronize", at + 11.0, 240.0, scalar)
            del item
        t += step_dur + 20.0
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "SYNTHETIC (no GPU recorded this)"}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, "baseTimeNanoseconds": BASE_NS,
           "traceEvents": b.events, "traceName": str(path)}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return {"kernels": steps * kernels, "kernel_us": kernel_us, "steps": steps}
