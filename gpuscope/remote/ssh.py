"""The system ``ssh`` as gpuscope's one connection to a remote host, and its failures as one line.

The user's ``~/.ssh/config``, keys, agent and ProxyJump apply as they do for ``ssh`` itself.
``GPUSCOPE_SSH`` (split as a shell would) replaces the ``ssh`` command, e.g. ``ssh -F my_config``.
Nothing is stored and no master connection is left behind: each connection is one ``ssh`` process.
"""

from __future__ import annotations

import os
import shlex
import shutil

from gpuscope.errors import UserError
from gpuscope.remote.hostspec import HostSpec

SSH_ENV = "GPUSCOPE_SSH"
CONNECT_TIMEOUT_S = 15
# ssh exits 255 for its own errors; anything else is the remote command's exit status.
SSH_FAILED = 255


def ssh_command() -> list[str]:
    """The ssh program and its own options: ``$GPUSCOPE_SSH`` or ``ssh``."""
    text = os.environ.get(SSH_ENV, "").strip() or "ssh"
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"{SSH_ENV}={text!r} cannot be split into words: {exc}") from None
    return words


def ssh_argv(host: HostSpec, remote_command: str, connect_timeout: int = CONNECT_TIMEOUT_S) -> list[str]:
    """The argv that runs ``remote_command`` (a line for the remote's shell) on ``host``: no
    terminal, never a password prompt, no shared master connection."""
    argv = [*ssh_command(), "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}",
            "-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4"]
    if host.port is not None:
        argv += ["-p", str(host.port)]
    if host.user:
        argv += ["-l", host.user]
    return [*argv, "--", host.host, remote_command]


# (words in ssh's stderr, what the user reads): first match wins. A host key ssh does not know
# and one that changed both end in "Host key verification failed", so the changed key comes first.
_FAILURES: tuple[tuple[str, str], ...] = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED",
     "the host key of {host} has CHANGED since it was last seen (reinstalled, or an attack): if you trust it, "
     "remove the old key with `ssh-keygen -R {known_as}` and connect once by hand: `{by_hand}`"),
    ("host key is known for",
     "the host key of {host} is not known yet: connect once by hand to check and accept it: `{by_hand}`"),
    ("Host key verification failed",
     "the host key of {host} could not be verified: connect once by hand to check it: `{by_hand}`"),
    ("Could not resolve hostname", "unknown host {name!r}: ssh cannot resolve it (check the name or ~/.ssh/config)"),
    ("Connection refused", "{host} refused the connection: is sshd running on that port?"),
    ("Permission denied",
     "{host} refused the login: no key it accepts (ssh runs without prompts: load the key into "
     "ssh-agent or name it in ~/.ssh/config, and check the user name)"),
    ("timed out", "connecting to {host} timed out"),
    ("No route to host", "no route to {host}"),
    ("Network is unreachable", "the network of {host} is unreachable"),
    ("Connection closed by", "{host} closed the connection before the login"),
    ("Connection reset by", "{host} closed the connection before the login"),
)


def describe_failure(host: HostSpec, stderr: str) -> str:
    """One line for an ssh that exited 255 with ``stderr``."""
    known_as = shlex.quote(f"[{host.host}]:{host.port}" if host.port not in (None, 22) else host.host)
    fields = {"host": str(host), "name": host.host, "known_as": known_as,
              "by_hand": shlex.join(["ssh", *ssh_argv_for_user(host)])}
    for words, text in _FAILURES:
        if words in stderr:
            return text.format(**fields)
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    return f"ssh to {host} failed: {last}" if last else f"ssh to {host} failed (exit {SSH_FAILED}, no message)"


def ssh_argv_for_user(host: HostSpec) -> list[str]:
    """What the user types to connect by hand (for the fix in a message)."""
    argv = []
    if host.port is not None:
        argv += ["-p", str(host.port)]
    target = f"{host.user}@{host.host}" if host.user else host.host
    return [*argv, target]


def check_usable() -> None:
    """A UserError when the ssh program cannot be started."""
    program = ssh_command()[0]
    if shutil.which(program) is None:
        raise UserError(f"cannot connect: the ssh program {program!r} is not installed or not on PATH"
                        f"{f' (from {SSH_ENV})' if os.environ.get(SSH_ENV) else ''}")
