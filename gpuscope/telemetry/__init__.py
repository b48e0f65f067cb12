"""Live telemetry: NVML GPUs, a run's process tree and host totals, sampled on a steady cadence.

Entry points: ``gpu.open_backend()``, ``sampler.RunSampler`` / ``sampler.Sampler``,
``series.load_series()``; metrics are declared in ``metrics``.
See docs/TELEMETRY.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging


def log() -> logging.Logger:
    """The telemetry logger (only a failure writes to it)."""
    import logging  # here: `gpuscope run` loads telemetry while the program starts; only failures log

    return logging.getLogger("gpuscope.telemetry")
