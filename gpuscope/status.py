"""Exit statuses: a code, or the name of the signal that ended the process."""

from __future__ import annotations

from gpuscope.choices import Choices
from gpuscope.record import record


class RunStatus(Choices):
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

    @property
    def final(self) -> bool:
        return self is not RunStatus.RUNNING


@record(frozen=True)
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
    """``signal.Signals(num).name``, or ``SIG<num>`` for a number it does not name, read from ``_signal``
    (the C module behind ``signal``): importing ``signal`` builds its enums, which pull in ``enum`` and
    ``functools`` (10-40 ms on a 2-core runner; on ``gpuscope run``'s path every pool whose workers
    are terminated at its close asks this)."""
    global _SIGNAL_NAMES
    if _SIGNAL_NAMES is None:
        import _signal

        names: dict[int, str] = {}
        # signal's enum: the upper-case SIG* names but SIG_*; of aliases (SIGIOT = SIGABRT) the
        # first by name, as Enum._convert_ sorts them.
        for name in sorted(dir(_signal)):
            if name.startswith("SIG") and not name.startswith("SIG_") and name.isupper():
                names.setdefault(getattr(_signal, name), name)
        _SIGNAL_NAMES = names
    return _SIGNAL_NAMES.get(num) or f"SIG{num}"


_SIGNAL_NAMES: dict[int, str] | None = None
