"""Run and exit statuses: what a run is (an enum that describes itself) and how its program ended."""

from __future__ import annotations

from enum import Enum
from signal import Signals
from typing import NamedTuple


class RunStatus(str, Enum):
    """A run's state in the store and in JSON (the value is the stored text).

    ``running`` until it ends; then ``exited`` (exit code 0), ``failed`` (non-zero exit, a signal,
    or a recording that broke), ``stopped`` (the user stopped it) or ``error`` (gpuscope could not
    start it, or gpuscope itself died while it ran).
    """

    RUNNING = "running"
    EXITED = "exited"
    FAILED = "failed"
    STOPPED = "stopped"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls, text: object) -> RunStatus:
        """The status stored as ``text``; ``error`` for text no version of gpuscope wrote."""
        try:
            return cls(str(text))
        except ValueError:
            return cls.ERROR

    @property
    def final(self) -> bool:
        return self is not RunStatus.RUNNING

    @property
    def ok(self) -> bool:
        """The program ran to its end with exit code 0 (the runs compare and medians count)."""
        return self is RunStatus.EXITED

    @property
    def label(self) -> str:
        """The word a table shows."""
        return self.value

    @property
    def outcome(self) -> str:
        """How ``gpuscope run``'s last line says it ended: "exited", "failed", "was stopped"."""
        return {RunStatus.STOPPED: "was stopped", RunStatus.ERROR: "failed",
                RunStatus.RUNNING: "is running"}.get(self, self.value)

    def describe(self, exit: ExitStatus | None = None, error: str | None = None) -> str:
        """One phrase for a run in this state: "exited (exit code 0)", "failed (killed by SIGKILL)",
        "stopped", "still running", "error: <why>" (``exit``/``error`` add what is known)."""
        if self is RunStatus.RUNNING:
            return "still running"
        if self is RunStatus.STOPPED:
            return "stopped"
        if self is RunStatus.ERROR:
            return f"error: {error}" if error else "error"
        known = exit is not None and (exit.code is not None or exit.signal is not None)
        return f"{self.value} ({exit.describe()})" if known and exit is not None else self.value


class ExitStatus(NamedTuple):
    """How the run's first process ended: an exit code, or the signal that ended it."""

    code: int | None
    signal: str | None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        if returncode < 0:
            return cls(None, signal_name(-returncode))
        # A shell-style 128+N means the same to users; keep the code, it is what the program returned.
        return cls(returncode, None)

    def describe(self) -> str:
        if self.signal:
            return f"killed by {self.signal}"
        return f"exit code {self.code}"


def describe_run(status: object, exit_code: int | None = None, signal: str | None = None,
                 error: str | None = None) -> str:
    """:meth:`RunStatus.describe` of a stored run's columns (status text, exit code, signal, error)."""
    return RunStatus.parse(status).describe(ExitStatus(exit_code, signal), error)


def signal_name(num: int) -> str:
    """``signal.Signals(num).name``, or ``SIG<num>`` for a number it does not name."""
    try:
        return Signals(num).name
    except ValueError:
        return f"SIG{num}"
