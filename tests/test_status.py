"""gpuscope.status.signal_name names a signal as ``signal.Signals`` does, with a name for any number."""

from __future__ import annotations

import signal

from gpuscope.status import ExitStatus, signal_name


def test_signal_names_are_those_of_signal_signals():
    """Every number 0-70: the enum's (canonical) name, aliases included (SIGIOT is SIGABRT, SIGCLD
    SIGCHLD, SIGPOLL SIGIO), or ``SIG<n>`` where the enum has none (the real-time signals between
    SIGRTMIN and SIGRTMAX)."""
    for num in range(71):
        try:
            want = signal.Signals(num).name
        except ValueError:
            want = f"SIG{num}"
        assert signal_name(num) == want, num
    assert signal_name(signal.SIGABRT) == "SIGABRT" and signal_name(signal.SIGCHLD) == "SIGCHLD"
    assert ExitStatus.from_returncode(-signal.SIGKILL).describe() == "killed by SIGKILL"

