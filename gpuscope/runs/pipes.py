"""The program's stdout descriptor: a raw-output pseudo-terminal when someone watches it live, else
a pipe with a 1 MiB buffer (docs in :mod:`gpuscope.runs.output`, which reads them)."""

from __future__ import annotations

import fcntl
import os
import sys
import termios

PIPE_SIZE = 1 << 20


def open_output(live: bool) -> tuple[int, int]:
    """(fd for the child, fd to read) for the program's stdout: a raw-output pty when ``live``."""
    if live:
        try:
            master, slave = os.openpty()
        except OSError:
            pass  # no ptys (a locked-down container): a pipe still works
        else:
            _raw_output(slave)
            return slave, master
    read, write = os.pipe()
    widen_pipe(write)  # fewer wake-ups for programs that print a lot
    return write, read


def widen_pipe(fd: int) -> None:
    """Ask for a ``PIPE_SIZE`` pipe buffer (Linux; capped by /proc/sys/fs/pipe-max-size). Anything
    but a pipe (a terminal, a file) refuses, and is left as it is."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except OSError:
        pass


def _raw_output(fd: int) -> None:
    """No output processing (``\\n`` stays ``\\n``), no echo; the terminal's size when we have one."""
    attrs = termios.tcgetattr(fd)
    attrs[1] &= ~termios.OPOST
    attrs[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG | termios.IEXTEN)
    termios.tcsetattr(fd, termios.TCSANOW, attrs)
    try:
        size = fcntl.ioctl(sys.__stdout__.fileno(), termios.TIOCGWINSZ, b"\0" * 8)  # type: ignore[union-attr]
        fcntl.ioctl(fd, termios.TIOCSWINSZ, size)
    except (OSError, AttributeError, ValueError):
        pass
