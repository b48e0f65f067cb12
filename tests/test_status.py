"""gpuscope.status.signal_name names a signal as ``signal.Signals`` does, without importing ``signal``."""

from __future__ import annotations

import signal

from gpuscope.status import ExitStatus, signal_name
from tests.fresh_python import fresh_json


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


def test_naming_a_signal_does_not_import_signal():
    probe = ("import sys\n"
             "from gpuscope.status import signal_name\n"
             "print('[\"%s\", %s]' % (signal_name(15), str('signal' in sys.modules).lower()))\n")
    assert fresh_json(probe, bare=True) == ["SIGTERM", False]
