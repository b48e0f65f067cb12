"""TEST DOUBLE of ``torch`` for the GPU smoke script's job code (no GPU here): ``torch.zeros`` and
``torch.cuda._sleep`` / ``synchronize`` / ``Event`` / ``init``, enough to run the jobs' process logic
(barrier, shared queue, fork and spawn) for real. ``_sleep(cycles)`` sleeps cycles / 1e9 s."""

from __future__ import annotations

import time


def zeros(*shape, device=None):
    return [0] * (shape[0] if shape else 0)


class cuda:  # noqa: N801 - the module's name
    _clock = 0.0

    @staticmethod
    def init() -> None:
        pass

    @staticmethod
    def _sleep(cycles: int) -> None:
        time.sleep(cycles / 1e9)

    @staticmethod
    def synchronize() -> None:
        pass

    @staticmethod
    def get_device_name(index: int = 0) -> str:
        return "FAKE GPU (test double)"

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.t = 0.0

        def record(self) -> None:
            self.t = time.perf_counter()

        def elapsed_time(self, other) -> float:
            return (other.t - self.t) * 1e3
