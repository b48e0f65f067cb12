"""Provision what the remote-host tests need (tests/remote/conftest.py): OpenSSH's server and a
second local user, ``gpuscope-remote``, who plays the remote host's user.

As root: ``apt-get install -y openssh-server`` when /usr/sbin/sshd is missing, and ``useradd -m -s
/bin/bash gpuscope-remote`` when that user is missing. Idempotent and quiet; one line when it
cannot (not root, no apt-get). The tests start their own sshd on a free port: nothing is enabled
or started here.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time

SSHD = "/usr/sbin/sshd"
USER = "gpuscope-remote"


def _have_user() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


def _run(argv: list[str], env: dict[str, str] | None = None) -> str | None:
    """None when it worked, else the last line it printed."""
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


def provision() -> str | None:
    """None when sshd and the user are there (made if needed), else why not (one line)."""
    missing = [what for what, ok in (("openssh-server", os.path.exists(SSHD)), (f"the user {USER}", _have_user()))
               if not ok]
    if not missing:
        return None
    if os.geteuid() != 0:
        return (f"provision_sshd: needs root to add {' and '.join(missing)} (the remote-host tests need "
                f"{SSHD} and a user {USER} with a home): run it as root")
    started = time.monotonic()
    if not os.path.exists(SSHD):
        if shutil.which("apt-get") is None:
            return f"provision_sshd: {SSHD} is missing and there is no apt-get: install openssh-server"
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "openssh-server"]
        why = _run(install, env)
        if why is not None:   # the package lists may be empty or stale: read them once, then again
            _run(["apt-get", "update", "-q"], env)
            why = _run(install, env)
        if why is not None:
            return f"provision_sshd: apt-get install openssh-server failed: {why}"
    if not _have_user():
        why = _run(["useradd", "-m", "-s", "/bin/bash", USER])
        if why is not None:
            return f"provision_sshd: useradd {USER} failed: {why}"
    print(f"provision_sshd: done in {time.monotonic() - started:.1f} s")
    return None


def main() -> int:
    why = provision()
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
