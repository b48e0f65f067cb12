"""Live telemetry: NVML GPUs, a run's process tree and host totals, sampled on a steady cadence.

Entry points: ``gpu.open_backend()``, ``sampler.RunSampler`` / ``sampler.Sampler``,
``series.load_series()``; metrics are declared in ``metrics``.
See docs/TELEMETRY.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

# Why a run has no GPU telemetry when its program ended before the sampler's first look: NVML is
# not opened for a run that is already over (importing pynvml is costly, its init up to seconds on
# a machine without the driver's persistence mode).
NOT_OPENED = "the program had ended before the first sample (NVML not opened)"


def log() -> logging.Logger:
    """The telemetry logger (only a failure writes to it)."""
    import logging  # here: `gpuscope run` loads telemetry while the program starts; only failures log

    return logging.getLogger("gpuscope.telemetry")
