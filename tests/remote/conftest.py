"""A real sshd for the remote-host tests: its own port on 127.0.0.1, its own host key, key
authentication only, logging in as the second local user ``gpuscope-remote`` (made by
scripts/provision_sshd.py), with the agent installed once per session from the checkout's wheel.

The sshd is per pytest process (safe under xdist): each one appends its own client key to the
user's authorized_keys (and takes it out at the end) and marks its sessions with an environment
variable, so its teardown ends exactly the processes its tests started as that user.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import provision_sshd  # a script in scripts/, not a package

USER = provision_sshd.USER
SSHD = provision_sshd.SSHD
MARK_ENV = "GPUSCOPE_TEST_SSHD"   # set by sshd in every session of this test sshd
# sshd sets PATH itself; a test gives the remote another one through this variable, which the
# user's ~/.bashrc reads first (as users set PATH there).
PATH_ENV = "GPUSCOPE_TEST_PATH"
BASHRC_LINE = f'[ -n "${PATH_ENV}" ] && PATH="${PATH_ENV}"   # gpuscope tests (tests/remote/conftest.py)\n'


@dataclass
class Sshd:
    port: int
    folder: Path       # 0755: the remote user can read scripts written here
    config: Path       # the client's ssh config
    mark: str
    user: pwd.struct_passwd
    wheel_cache: Path  # GPUSCOPE_CACHE while connecting: the agent's wheel is built once per session
    install_log: list[tuple[str, float | None]]
    install_s: float

    @property
    def host(self) -> str:
        return f"{USER}@127.0.0.1:{self.port}"

    @property
    def ssh_env(self) -> str:
        return f"ssh -F {self.config}"

    def script(self, name: str, text: str) -> Path:
        """A file the remote user can read and run."""
        path = self.folder / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    def ssh(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """A plain ssh command as the remote user (for checks and setup)."""
        return subprocess.run(["ssh", "-F", str(self.config), "-p", str(self.port), "-T",
                               f"{USER}@127.0.0.1", *argv], capture_output=True, text=True, timeout=timeout)


def _need() -> str | None:
    """Why the sshd cannot be made here, or None (provisioning what is missing when root)."""
    if os.geteuid() != 0:
        return "needs root: an sshd on its own port logging in as a second user (scripts/provision_sshd.py)"
    return provision_sshd.provision()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
                   check=True, capture_output=True)
    return path.with_suffix(".pub").read_text().strip()


def _authorize(user: pwd.struct_passwd, key: str, add: bool) -> None:
    """Add or remove one line of the user's authorized_keys (owned by the user, mode 600)."""
    ssh_dir = Path(user.pw_dir) / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    os.chown(ssh_dir, user.pw_uid, user.pw_gid)
    keys = ssh_dir / "authorized_keys"
    with open(ssh_dir / ".gpuscope-tests.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lines = keys.read_text().splitlines() if keys.exists() else []
        lines = [ln for ln in lines if ln.strip() and ln.strip() != key] + ([key] if add else [])
        keys.write_text("".join(f"{ln}\n" for ln in lines))
        os.chown(keys, user.pw_uid, user.pw_gid)
        keys.chmod(0o600)


def _bashrc_reads_path(user: pwd.struct_passwd) -> None:
    """The user's ~/.bashrc starts with the line that takes PATH_ENV (once)."""
    rc = Path(user.pw_dir) / ".bashrc"
    text = rc.read_text() if rc.exists() else ""
    if BASHRC_LINE not in text:
        rc.write_text(BASHRC_LINE + text)
        os.chown(rc, user.pw_uid, user.pw_gid)


def _write_sshd_config(folder: Path, port: int, mark: str) -> Path:
    cfg = folder / "sshd_config"
    cfg.write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {folder / 'host_key'}
PidFile {folder / 'sshd.pid'}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM yes
AllowUsers {USER}
PermitRootLogin no
SetEnv {MARK_ENV}={mark}
AcceptEnv XDG_DATA_HOME {PATH_ENV} PIP_NO_INDEX PIP_FIND_LINKS
LogLevel ERROR
""")
    return cfg


def _write_client_config(folder: Path, port: int, host_pub: str) -> Path:
    known = folder / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_pub.rsplit(' ', 1)[0]}\n")
    cfg = folder / "ssh_config"
    cfg.write_text(f"""\
Host *
  IdentityFile {folder / 'client_key'}
  IdentitiesOnly yes
  UserKnownHostsFile {known}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  LogLevel ERROR
""")
    return cfg


def _wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode}: {log.read_text()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on {port}: {log.read_text()[-500:]}")


def end_marked_processes(mark: str, uid: int) -> list[int]:
    """Kill every process of ``uid`` started by this sshd's sessions; their pids."""
    victims = []
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] is None or p.info["uids"].real != uid:
                continue
            if p.environ().get(MARK_ENV) == mark:
                p.kill()
                victims.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    psutil.wait_procs(victims, timeout=5)
    return [p.pid for p in victims]


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """The session's sshd (skips with the reason where it cannot run: not root, no openssh-server)."""
    why = _need()
    if why is not None:
        pytest.skip(why)
    user = pwd.getpwnam(USER)
    folder = Path(tempfile.mkdtemp(prefix="gpuscope-sshd-"))
    folder.chmod(0o755)
    mark = uuid.uuid4().hex[:12]
    host_pub = _keygen(folder / "host_key")
    client_pub = _keygen(folder / "client_key")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege separation folder
    port = _free_port()
    cfg = _write_sshd_config(folder, port, mark)
    log = folder / "sshd.log"
    _authorize(user, client_pub, add=True)
    _bashrc_reads_path(user)
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=log_fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc, log)
        server = Sshd(port, folder, _write_client_config(folder, port, host_pub), mark, user,
                      tmp_path_factory.mktemp("wheel-cache"), [], 0.0)
        _install_agent(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        end_marked_processes(mark, user.pw_uid)
        _authorize(user, client_pub, add=False)
        shutil.rmtree(folder, ignore_errors=True)


def _install_agent(server: Sshd) -> None:
    """The real install path: connect once; the bootstrap installs the agent when it is missing."""
    from gpuscope.remote.bootstrap import open_agent
    from gpuscope.remote.hostspec import HostSpec

    saved = {name: os.environ.get(name) for name in ("GPUSCOPE_SSH", "GPUSCOPE_CACHE")}
    os.environ.update(GPUSCOPE_SSH=server.ssh_env, GPUSCOPE_CACHE=str(server.wheel_cache))
    started = time.monotonic()
    try:
        proc = open_agent(HostSpec.parse(server.host), progress=lambda t, f: server.install_log.append((t, f)))
        assert proc.stdout is not None and proc.stdin is not None
        hello = proc.stdout.readline()
        proc.stdin.close()
        proc.wait(30)
        assert b"gpuscope-agent" in hello, hello
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    server.install_s = time.monotonic() - started


@pytest.fixture
def remote_host(sshd, monkeypatch):
    """``gpuscope-remote@127.0.0.1:PORT`` with GPUSCOPE_SSH set to reach it."""
    monkeypatch.setenv("GPUSCOPE_SSH", sshd.ssh_env)
    monkeypatch.setenv("GPUSCOPE_CACHE", str(sshd.wheel_cache))
    yield sshd.host
