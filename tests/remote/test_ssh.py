"""The ssh transport and the agent's bootstrap over a real sshd: host specs, ssh's failures as one
line each, a remote Python that is too old or missing, a full remote disk, a fresh install and an
update of the agent (tests/remote/conftest.py makes the sshd and the second user)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from gpuscope.errors import UserError
from gpuscope.remote import agentwheel, bootstrap, ssh
from gpuscope.remote.hostspec import HostSpec
from tests.conftest import ROOT
from tests.remote.conftest import MARK_ENV, PATH_ENV, USER

pytestmark = pytest.mark.timeout(240)


# -- host specs (no sshd) ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "host", "user", "port"), [
    ("box", "box", None, None),
    ("me@box.lab.example:2222", "box.lab.example", "me", 2222),
    ("[::1]:2222", "::1", None, 2222),
    ("me@[fe80::1%eth0]", "fe80::1%eth0", "me", None),
    ("gpu-node_3", "gpu-node_3", None, None),
])
def test_hostspec_parses_and_round_trips(text, host, user, port):
    spec = HostSpec.parse(text)
    assert (spec.host, spec.user, spec.port) == (host, user, port)
    assert str(spec) == text and HostSpec.parse(str(spec)) == spec


@pytest.mark.parametrize("text", ["", "box:0", "box:99999", "box:ssh", "::1:22", "[::1", "[::1]x", "me@",
                                  "-oProxyCommand=x", "a b", "me@@box", "[]:22"])
def test_bad_hostspec_is_one_line(text):
    with pytest.raises(UserError) as info:
        HostSpec.parse(text)
    assert "\n" not in str(info.value) and str(info.value).startswith("bad host")


def test_ssh_argv_is_one_connection_without_prompts(monkeypatch):
    monkeypatch.setenv("GPUSCOPE_SSH", "ssh -F '/my dir/config'")
    argv = ssh.ssh_argv(HostSpec.parse("me@box:2200"), "true")
    assert argv[:3] == ["ssh", "-F", "/my dir/config"]
    assert "BatchMode=yes" in argv and "ControlMaster=no" in argv and "-T" in argv
    assert argv[argv.index("-p") + 1] == "2200" and argv[argv.index("-l") + 1] == "me"
    assert argv[-3:] == ["--", "box", "true"]   # the host can never be read as an option


# -- over the real sshd --------------------------------------------------------------------------

def gpuscope(*argv: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *argv], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=timeout, cwd=ROOT)


def assert_one_line(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """The command failed with one error line on stderr holding ``words``, and no traceback (the
    agent's install steps may come before it)."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("gpuscope: error:")]
    assert proc.returncode != 0, proc
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    others = [ln for ln in proc.stderr.splitlines() if ln.strip() and ln not in lines]
    assert all(ln.startswith("gpuscope: ") for ln in others), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def leftovers(sshd, within_s: float = 10.0) -> list[str]:
    """ssh clients of this sshd still running here, and its sessions' processes there, once they
    had ``within_s`` to end (the remote side ends a moment after the client: sshd closes the session)."""
    deadline = time.monotonic() + within_s
    while (found := _running(sshd)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _running(sshd) -> list[str]:
    found = []
    for p in psutil.process_iter(["cmdline", "uids"]):
        try:
            cmd = p.info["cmdline"] or []
            if cmd and os.path.basename(cmd[0]) == "ssh" and any(sshd.folder.as_posix() in a for a in cmd):
                found.append(" ".join(cmd))
            elif p.info["uids"] and p.info["uids"].real == sshd.user.pw_uid and p.environ().get(MARK_ENV) == sshd.mark:
                found.append(" ".join(cmd))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def client_config(sshd, tmp: Path, key: Path | None = None, known_hosts: str | None = None) -> str:
    """A GPUSCOPE_SSH for the test sshd with another client key or another known_hosts."""
    text = sshd.config.read_text()
    if key is not None:
        text = text.replace(str(sshd.folder / "client_key"), str(key))
    if known_hosts is not None:
        (tmp / "known_hosts").write_text(known_hosts)
        text = text.replace(str(sshd.folder / "known_hosts"), str(tmp / "known_hosts"))
    (tmp / "ssh_config").write_text(text)
    return f"ssh -F {tmp / 'ssh_config'}"


def test_agent_is_installed_without_qt_and_runs_commands(sshd, remote_host):
    """The session's install: the agent's venv has gpuscope and no Qt; a command runs there."""
    venv = installed_agent(Path(sshd.user.pw_dir) / ".local" / "share")
    marker = json.loads(Path(venv, bootstrap.MARKER).read_text())
    # the build of the last connect's checkout (another process may have seen newer files)
    assert marker["version"] == bootstrap.__version__ and len(marker["build"]) == 16
    assert Path(venv).stat().st_uid == sshd.user.pw_uid
    probe = sshd.ssh(f"{venv}/bin/python -c 'import gpuscope.remote.agent, gpuscope.api, psutil, numpy; "
                     f"import importlib.util as u; print(u.find_spec(\"PySide6\"), u.find_spec(\"pyqtgraph\"))'")
    assert probe.returncode == 0 and probe.stdout.strip() == "None None", probe
    proc = gpuscope("--host", remote_host, "history", "--json")
    assert proc.returncode == 0 and isinstance(json.loads(proc.stdout), list), proc


def test_every_command_imports_there_without_qt(sshd, remote_host):
    """The commands the agent runs (all but gui) load in the agent's venv, which has no Qt."""
    venv = installed_agent(Path(sshd.user.pw_dir) / ".local" / "share")
    code = ("import importlib, sys; from gpuscope.cli import COMMANDS; "
            "[importlib.import_module('gpuscope.commands.' + n) for n in COMMANDS if n != 'gui']; "
            "import gpuscope.remote.agent, gpuscope.remote.ops; "
            "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph', 'shiboken6'))))")
    probe = sshd.ssh(f"{venv}/bin/python -c {shlex.quote(code)}")
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe


def test_help_lists_host():
    proc = gpuscope("--help")
    assert proc.returncode == 0 and "--host [USER@]HOST[:PORT]" in proc.stdout


def test_unknown_host_is_one_line():
    proc = gpuscope("--host", "no-such-host.invalid", "history")
    assert_one_line(proc, "unknown host", "no-such-host.invalid")


def test_refused_connection_is_one_line(sshd, remote_host):
    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = gpuscope("--host", f"{USER}@127.0.0.1:{port}", "history")
    assert_one_line(proc, "refused the connection", str(port))
    assert leftovers(sshd) == []


def test_refused_key_is_one_line(sshd, remote_host, tmp_path, monkeypatch):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    monkeypatch.setenv("GPUSCOPE_SSH", client_config(sshd, tmp_path, key=other))
    assert_one_line(gpuscope("--host", remote_host, "history"), "refused the login", "ssh-agent")
    assert leftovers(sshd) == []


def test_changed_host_key_says_how_to_fix(sshd, remote_host, tmp_path, monkeypatch):
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = other.with_suffix(".pub").read_text().split()
    known = f"[127.0.0.1]:{sshd.port} {pub[0]} {pub[1]}\n"
    monkeypatch.setenv("GPUSCOPE_SSH", client_config(sshd, tmp_path, known_hosts=known))
    line = assert_one_line(gpuscope("--host", remote_host, "history"), "CHANGED",
                           f"ssh-keygen -R '[127.0.0.1]:{sshd.port}'")
    assert f"ssh -p {sshd.port} {USER}@127.0.0.1" in line


def test_unknown_host_key_says_connect_once_by_hand(sshd, remote_host, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_SSH", client_config(sshd, tmp_path, known_hosts=""))
    assert_one_line(gpuscope("--host", remote_host, "history"), "not known yet", f"ssh -p {sshd.port}")


def test_connect_timeout_is_one_line(sshd, remote_host, monkeypatch):
    """A port that accepts but never speaks SSH: ssh's ConnectTimeout ends it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        monkeypatch.setenv("GPUSCOPE_SSH", f"{sshd.ssh_env} -o ConnectTimeout=1")
        assert_one_line(gpuscope("--host", f"{USER}@127.0.0.1:{port}", "history", timeout=60), "timed out")


FAKE_OLD_PYTHON = ("#!/bin/sh\n# test double: the real python3, saying it is 3.8.10\n"
                   "exec /usr/bin/python3 -c 'import sys; sys.version_info = (3, 8, 10, \"final\", 0); "
                   "code = sys.argv[2]; sys.argv = [\"-c\", *sys.argv[3:]]; exec(code)' \"$@\"\n")


def _bin_folder(sshd, name: str, newer: bool) -> str:
    """A folder for the remote's PATH: a fake old python3, sh, and python3.11 when ``newer``."""
    folder = sshd.folder / name
    folder.mkdir(mode=0o755)
    sshd.script(f"{name}/python3", FAKE_OLD_PYTHON)
    (folder / "sh").symlink_to("/bin/sh")
    if newer:
        (folder / "python3.11").symlink_to("/usr/bin/python3.11")
    return str(folder)


def test_named_old_remote_python_is_refused(sshd, remote_host, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_REMOTE_PYTHON", str(sshd.script("fake-python3.8", FAKE_OLD_PYTHON)))
    assert_one_line(gpuscope("--host", remote_host, "history"), "3.8.10", "too old", ">= 3.10")
    assert leftovers(sshd) == []


def test_old_python3_hands_over_to_a_newer_one_on_path(sshd, remote_host, monkeypatch, tmp_path):
    folder = _bin_folder(sshd, f"bin-newer-{tmp_path.name}", newer=True)
    monkeypatch.setenv("GPUSCOPE_SSH", f"{sshd.ssh_env} -o SetEnv={PATH_ENV}={folder}:/usr/bin:/bin")
    proc = gpuscope("--host", remote_host, "history", "--json", "--limit", "1")
    assert proc.returncode == 0 and proc.stdout.startswith("["), proc


def test_only_an_old_python_on_path_is_one_line(sshd, remote_host, monkeypatch, tmp_path):
    folder = _bin_folder(sshd, f"bin-old-{tmp_path.name}", newer=False)
    monkeypatch.setenv("GPUSCOPE_SSH", f"{sshd.ssh_env} -o SetEnv={PATH_ENV}={folder}")
    assert_one_line(gpuscope("--host", remote_host, "history"), "3.8.10", "too old", "GPUSCOPE_REMOTE_PYTHON")
    assert leftovers(sshd) == []


def test_missing_remote_python_is_one_line(sshd, remote_host, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_REMOTE_PYTHON", "/nowhere/python3")
    assert_one_line(gpuscope("--host", remote_host, "history"), "cannot start Python", "/nowhere/python3")


def _remote_data_home(sshd, tmp_path: Path, size: str | None = None) -> Path:
    """A folder the remote user owns, to be its XDG_DATA_HOME (a small tmpfs when ``size``)."""
    home = Path("/tmp") / f"gpuscope-xdg-{sshd.mark}-{tmp_path.name}"   # pytest's tmp is private to root
    home.mkdir(mode=0o755)
    if size is not None:
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(home)],
                               capture_output=True, text=True)
        if mount.returncode != 0:
            home.rmdir()
            pytest.skip(f"cannot mount a small tmpfs as the remote's full disk: {mount.stderr.strip()}")
    os.chown(home, sshd.user.pw_uid, sshd.user.pw_gid)
    return home


def _drop(home: Path, mounted: bool) -> None:
    if mounted:
        subprocess.run(["umount", str(home)], check=False)
    subprocess.run(["rm", "-rf", str(home)], check=False)


def test_full_remote_disk_is_one_line_and_leaves_no_venv(sshd, remote_host, tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as the remote's full disk")
    home = _remote_data_home(sshd, tmp_path, size="4m")
    try:
        monkeypatch.setenv("GPUSCOPE_SSH", f"{sshd.ssh_env} -o SetEnv=XDG_DATA_HOME={home}")
        assert_one_line(gpuscope("--host", remote_host, "history"), "disk is full", "No space left on device")
        agent_dir = home / "gpuscope" / "agent"
        assert [p.name for p in agent_dir.iterdir() if not p.name.startswith(".install")] == []
        assert leftovers(sshd) == []
    finally:
        _drop(home, mounted=True)


def test_failed_pip_install_is_one_line_and_leaves_no_venv(sshd, remote_host, tmp_path, monkeypatch):
    """The remote's pip finds no dependency (no index, no wheels): one line with pip's reason."""
    home = _remote_data_home(sshd, tmp_path)
    monkeypatch.setenv("GPUSCOPE_SSH", f"{sshd.ssh_env} -o 'SetEnv=XDG_DATA_HOME={home} PIP_NO_INDEX=1 "
                                       f"PIP_FIND_LINKS=/nowhere'")
    try:
        line = assert_one_line(gpuscope("--host", remote_host, "history"), "installing", "numpy", "failed:")
        assert "matching distribution" in line or "find" in line, line
        assert not list((home / "gpuscope" / "agent").glob(f"{bootstrap.__version__}*"))
        assert leftovers(sshd) == []
    finally:
        _drop(home, mounted=False)


def test_fresh_install_then_update_then_reuse(sshd, remote_host, tmp_path, monkeypatch):
    """The real install path into an empty data folder, an update of the same version to another
    build (only gpuscope is reinstalled), then a connect that installs nothing."""
    home = _remote_data_home(sshd, tmp_path)
    monkeypatch.setenv("GPUSCOPE_SSH", f"{sshd.ssh_env} -o SetEnv=XDG_DATA_HOME={home}")
    host = HostSpec.parse(remote_host)
    try:
        said: list[tuple[str, float | None]] = []
        started = time.perf_counter()
        hello = _hello(host, lambda text, fraction: said.append((text, fraction)))
        print(f"\nfirst install of the agent (venv, gpuscope, its deps from the index): "
              f"{time.perf_counter() - started:.1f} s")
        assert hello["uid"] == sshd.user.pw_uid
        texts = [t for t, _ in said]
        assert any("not installed there" in t for t in texts) and "creating the virtual environment" in texts
        assert said[-1][1] == 1.0 and said[-1][0].startswith(f"installed gpuscope {bootstrap.__version__}")
        venv = installed_agent(home)
        older = venv.with_name(f"{bootstrap.__version__}-an-older-build")   # as if made by another checkout
        venv.rename(older)
        (older / bootstrap.MARKER).write_text(json.dumps({"version": bootstrap.__version__, "build": "an-older-build"}))
        stale = []
        for age in (1, 2):   # two builds older still: after the update only KEEP_BUILDS folders stay
            fake = venv.with_name(f"{bootstrap.__version__}-stale{age}")
            (fake / "bin").mkdir(parents=True)
            (fake / "bin" / "python").symlink_to("/usr/bin/python3")
            (fake / bootstrap.MARKER).write_text(json.dumps({"version": bootstrap.__version__, "build": f"s{age}"}))
            when = time.time() - 3600 * age
            os.utime(fake / bootstrap.MARKER, (when, when))
            for path in (fake, fake / "bin", fake / "bin" / "python", fake / bootstrap.MARKER):
                os.lchown(path, sshd.user.pw_uid, sshd.user.pw_gid)   # the remote user removes them
            stale.append(fake)
        said.clear()
        _hello(host, lambda text, fraction: said.append((text, fraction)))
        texts = [t for t, _ in said]
        assert any("another build there" in t for t in texts) and "creating the virtual environment" not in texts
        assert f"copying the environment of {older.name}" in texts and texts[-1].startswith("updated gpuscope")
        assert installed_agent(home) == venv and (older / bootstrap.MARKER).exists()   # the older one is kept
        assert bootstrap.KEEP_BUILDS == 3 and stale[0].exists() and not stale[1].exists()
        said.clear()
        _hello(host, lambda text, fraction: said.append((text, fraction)))
        assert said == []
    finally:
        _drop(home, mounted=False)


def installed_agent(data_home: Path) -> Path:
    """The agent folder of this version installed last under ``data_home`` (XDG_DATA_HOME)."""
    folders = [p for p in (data_home / "gpuscope" / "agent").glob(f"{bootstrap.__version__}-*")
               if (p / bootstrap.MARKER).exists()]
    assert folders, f"no agent installed under {data_home}"
    return max(folders, key=lambda p: (p / bootstrap.MARKER).stat().st_mtime)


def _hello(host: HostSpec, progress) -> dict:
    proc = bootstrap.open_agent(host, progress=progress)
    assert proc.stdout is not None and proc.stdin is not None
    timer = threading.Timer(60, proc.kill)
    timer.start()
    try:
        hello = json.loads(proc.stdout.readline())
    finally:
        timer.cancel()
        proc.stdin.close()
        proc.wait(30)
    assert hello["hello"] == "gpuscope-agent"
    return hello


def test_gpuscope_ssh_that_cannot_run_is_one_line(monkeypatch):
    monkeypatch.setenv("GPUSCOPE_SSH", "/nowhere/ssh -v")
    assert_one_line(gpuscope("--host", "box", "history"), "/nowhere/ssh", "GPUSCOPE_SSH")
    monkeypatch.setenv("GPUSCOPE_SSH", "ssh -F 'unclosed")
    assert_one_line(gpuscope("--host", "box", "history"), "GPUSCOPE_SSH")


def test_remote_command_quotes_the_python_override(monkeypatch):
    monkeypatch.setenv("GPUSCOPE_REMOTE_PYTHON", "/opt/my python/bin/python3")
    line = bootstrap.remote_command()
    assert "\n" not in line and shlex.split(line)[:3] == ["exec", "sh", "-c"]
    assert shlex.split(shlex.split(line)[3])[:2] == ["exec", "/opt/my python/bin/python3"]


def test_no_python_on_the_remote_path_is_one_line(tmp_path):
    """The remote command under sh with a PATH that has no python (run here: the same sh)."""
    (tmp_path / "sh").symlink_to("/bin/sh")
    line = bootstrap.remote_command(None)
    proc = subprocess.run(["/bin/sh", "-c", line], env={"PATH": str(tmp_path)}, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == bootstrap.FAILED
    assert "no python3 or python on the PATH" in json.loads(proc.stdout)["text"]


def test_connect_time_with_the_agent_installed(sshd, remote_host, capsys):
    """Five connects to an installed agent: none installs anything; the figures go to docs/REMOTE.md."""
    host = HostSpec.parse(remote_host)
    _hello(host, None)   # this process's build is installed (another process may have updated it)
    times = []
    said: list[tuple[str, float | None]] = []
    for _ in range(5):
        started = time.perf_counter()
        _hello(host, lambda text, fraction: said.append((text, fraction)))
        times.append(time.perf_counter() - started)
    assert said == []
    times.sort()
    cli = []
    for _ in range(5):
        started = time.perf_counter()
        assert gpuscope("--host", remote_host, "history", "--json", "--limit", "1").returncode == 0
        cli.append(time.perf_counter() - started)
    cli.sort()
    with capsys.disabled():
        print(f"\nconnect to an installed agent (ssh + bootstrap + hello), 5 runs: median {times[2]:.3f} s, "
              f"min {times[0]:.3f} s, max {times[-1]:.3f} s; `gpuscope --host H history --json --limit 1`: "
              f"median {cli[2]:.3f} s, min {cli[0]:.3f} s, max {cli[-1]:.3f} s")
    assert times[2] < 10


def test_pure_wheel_for_another_python_installs_and_imports(tmp_path, monkeypatch):
    """A remote whose Python the compiled wheel does not fit gets a py3-none-any copy without the
    C helpers (their numpy fallbacks do the work); pip installs it and gpuscope imports."""
    import zipfile

    monkeypatch.setenv("GPUSCOPE_CACHE", str(tmp_path / "cache"))
    compiled = agentwheel.agent_wheel(bootstrap._python_tag())
    pure = agentwheel.agent_wheel("cp399-linux_x86_64")
    assert pure.name == f"gpuscope-{bootstrap.__version__}-py3-none-any.whl" and compiled != pure
    with zipfile.ZipFile(pure) as zf:
        names = zf.namelist()
        wheel_meta = zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert not any(n.endswith(".so") for n in names) and "gpuscope/remote/agent.py" in names
    assert "Root-Is-Purelib: true" in wheel_meta and "Tag: py3-none-any" in wheel_meta
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                          str(target), str(pure)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    probe = subprocess.run([sys.executable, "-c", "import gpuscope.nsys.pages, gpuscope.trace.timeline, "
                            "gpuscope.remote.agent; print(gpuscope.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(target)}, capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode == 0 and probe.stdout.startswith(str(target)), probe
