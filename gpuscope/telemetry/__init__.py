"""Live telemetry: NVML GPUs, a run's process tree and host totals, sampled on a steady cadence.

Entry points: ``gpu.open_backend()``, ``sampler.RunSampler`` / ``sampler.Sampler``,
``series.load_series()``, ``torchmem.read_torch_mem()``; metrics are declared in ``metrics``.
See docs/TELEMETRY.md.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def log() -> Any:
    """The telemetry logger (``logging`` is imported on first use: only a failure writes to it, and
    ``gpuscope run`` starts the sampler while the program starts)."""
    import logging

    return logging.getLogger("gpuscope.telemetry")
