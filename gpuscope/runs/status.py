"""Exit statuses: a code, or the name of the signal that ended the process."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class ExitStatus:
    code: int | None
    signal: str | None

    @classmethod
    def from_returncode(cls, returncode: int) -> "ExitStatus":
        if returncode < 0:
            return cls(None, signal_name(-returncode))
        # A shell-style 128+N means the same to users; keep the code, it is what the program returned.
        return cls(returncode, None)

    def describe(self) -> str:
        if self.signal:
            return f"killed by {self.signal}"
        return f"exit code {self.code}"


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"SIG{num}"
