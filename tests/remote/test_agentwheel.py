"""The agent's wheel made by a gpuscope installed without its checkout (the usual install): a real
non-editable install in a fresh virtual environment writes the wheel from its own distribution,
and that wheel installs into a second environment where the agent starts and the files are the
same. The dependencies come from the test interpreter's site-packages (a .pth line), so nothing is
downloaded."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest

from gpuscope import __version__
from gpuscope.errors import UserError
from gpuscope.remote import agentwheel

pytestmark = pytest.mark.xdist_group("remote")

PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"
INFO = f"gpuscope-{__version__}.dist-info"
# What an installer adds beside the metadata: differs between two installs of one wheel.
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json")


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GPUSCOPE_CACHE"] = str(cache)
    return env


def _site(venv: Path) -> Path:
    return venv / "lib" / PY / "site-packages"


def _venv(folder: Path, wheel: Path) -> Path:
    """A fresh virtual environment with ``wheel`` installed (no dependencies), then the test
    interpreter's site-packages added after its own for them (the .pth files there, the editable
    gpuscope's among them, are not run from a path a .pth adds)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=60)
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"), "install", "-q",
                          "--no-deps", "--no-index", "--disable-pip-version-check", str(wheel)],
                         capture_output=True, text=True, timeout=120)
    assert pip.returncode == 0, pip.stderr
    (_site(folder) / "_gpuscope_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder


def _record(venv: Path) -> dict[str, str]:
    """An install's files from its RECORD: path -> sha256 row, bytecode and installer files left out."""
    rows = csv.reader(io.StringIO((_site(venv) / INFO / "RECORD").read_text()))
    return {row[0]: row[1] for row in rows
            if row and "__pycache__/" not in row[0] and row[0].rpartition("/")[2] not in INSTALLER_FILES}


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> Path:
    """gpuscope installed non-editable from this checkout's wheel, in its own environment."""
    tmp = tmp_path_factory.mktemp("first")
    wheel = agentwheel.build_wheel(tmp)   # the checkout's form, as a release is made
    return _venv(tmp / "venv", wheel)


PROBE = """
import json
from gpuscope.remote import agentwheel, bootstrap
print(json.dumps({"package": str(agentwheel.package_dir()), "build": agentwheel.agent_build(),
                  "wheel": str(agentwheel.agent_wheel(bootstrap._python_tag())),
                  "pure": str(agentwheel.agent_wheel("cp399-linux_x86_64"))}))
"""


def test_an_installed_gpuscope_sends_its_own_wheel(first, tmp_path):
    probe = subprocess.run([str(first / "bin" / "python"), "-c", PROBE], capture_output=True, text=True,
                           cwd=tmp_path, env=_env(tmp_path / "cache"), timeout=120)
    assert probe.returncode == 0, probe.stderr
    made = json.loads(probe.stdout)
    assert Path(made["package"]) == _site(first) / "gpuscope"   # not this checkout
    assert made["build"] == agentwheel.agent_build()   # the same code is the same build in either form
    wheel = Path(made["wheel"])
    assert wheel.parent == tmp_path / "cache" / "agent-wheels" / f"{__version__}-{made['build']}"
    assert wheel.name == f"gpuscope-{__version__}-{agentwheel._this_python_tag()}.whl"
    with zipfile.ZipFile(wheel) as zf:
        record = zf.read(f"{INFO}/RECORD").decode()
        for name, digest, size in csv.reader(io.StringIO(record)):
            if name != f"{INFO}/RECORD":
                data = zf.read(name)
                sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (digest, size) == (f"sha256={sha}", str(len(data))), name
        assert set(zf.namelist()) == {row.split(",")[0] for row in record.splitlines()}
        assert f"Tag: {agentwheel._this_python_tag()}" in zf.read(f"{INFO}/WHEEL").decode()
        assert zf.read(f"gpuscope-{__version__}.data/scripts/gpuscope").startswith(b"#!python\n")

    second = _venv(tmp_path / "second", wheel)
    hello = subprocess.run([str(second / "bin" / "python"), "-m", "gpuscope.remote.agent"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, cwd=tmp_path, env=_env(tmp_path / "cache"), timeout=60)
    assert hello.returncode == 0, hello.stderr
    line = json.loads(hello.stdout.splitlines()[0])
    assert "hello" in line and line["version"] == __version__
    mine, theirs = _record(second), _record(first)
    assert mine.keys() == theirs.keys()
    differ = {path for path in mine if mine[path] != theirs[path]}
    assert differ == {"../../../bin/gpuscope"}   # the script's first line names its environment's python
    version = subprocess.run([str(second / "bin" / "gpuscope"), "--version"], capture_output=True, text=True,
                             cwd=tmp_path, env=_env(tmp_path / "cache"), timeout=60)
    assert version.stdout.strip() == f"gpuscope {__version__}", version.stderr
    assert (second / "bin" / "gpuscope").read_text().startswith(f"#!{second / 'bin' / 'python'}\n")

    pure = Path(made["pure"])
    assert pure.name == f"gpuscope-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(pure) as zf:
        names = zf.namelist()
        assert "gpuscope/remote/agent.py" in names and not any(n.endswith(".so") for n in names)


def _seed_data_home(sshd, tmp_path: Path) -> Path:
    """A data folder of the remote user holding a copy of the session's agent as another build of
    this version: the next connect updates it with the wheel the workstation sends (only gpuscope
    is installed, so nothing comes from an index)."""
    from gpuscope.remote.bootstrap import MARKER, agent_root

    installed = agent_root({"XDG_DATA_HOME": str(Path(sshd.user.pw_dir) / ".local" / "share")})
    source = max((p for p in installed.glob(f"{__version__}-*") if (p / MARKER).exists()),
                 key=lambda p: (p / MARKER).stat().st_mtime)
    home = Path("/tmp") / f"gpuscope-xdg-{sshd.mark}-{tmp_path.name}"   # pytest's tmp is private to root
    older = agent_root({"XDG_DATA_HOME": str(home)}) / f"{__version__}-an-older-build"
    older.parent.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(source), str(older)], check=True, timeout=120)
    marker = json.loads((older / MARKER).read_text())
    (older / MARKER).write_text(json.dumps({**marker, "build": "an-older-build"}))
    subprocess.run(["chown", "-R", f"{sshd.user.pw_uid}:{sshd.user.pw_gid}", str(home)], check=True)
    return home


def test_an_installed_gpuscope_installs_the_agent_over_ssh(sshd, remote_host, first, tmp_path):
    """The whole path from a gpuscope without a checkout: a real sshd, the remote's bootstrap
    installs the wheel this install wrote, and the remote command runs from it."""
    home = _seed_data_home(sshd, tmp_path)
    try:
        env = {**_env(tmp_path / "cache"), "GPUSCOPE_SSH": f"{sshd.ssh_env} -o SetEnv=XDG_DATA_HOME={home}"}
        proc = subprocess.run([str(first / "bin" / "gpuscope"), "--host", remote_host, "history", "--json"],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180)
        assert proc.returncode == 0, proc.stderr
        wheel = f"gpuscope-{__version__}-{agentwheel._this_python_tag()}.whl"
        assert f"sending {wheel}" in proc.stderr and "updated gpuscope" in proc.stderr, proc.stderr
        assert isinstance(json.loads(proc.stdout), (list, dict))
        (there,) = (p for p in (home / "gpuscope" / "agent").glob(f"{__version__}-*") if "older" not in p.name)
        mine, theirs = _record(there), _record(first)
        assert mine.keys() == theirs.keys()
        assert {path for path in mine if mine[path] != theirs[path]} == {"../../../bin/gpuscope"}
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def _broken_copy(first: Path, tmp_path: Path, damage: str) -> PathDistribution:
    venv = tmp_path / "venv"
    shutil.copytree(first, venv, symlinks=True)
    record = _site(venv) / INFO / "RECORD"
    if damage == "no RECORD":
        record.unlink()
    elif damage == "a file gone":
        (_site(venv) / "gpuscope" / "remote" / "agent.py").unlink()
    else:
        record.write_text(record.read_text().replace("gpuscope/remote/agent.py,", "gpuscope/remote/agent.py;", 1))
    return PathDistribution(_site(venv) / INFO)


@pytest.mark.parametrize(("damage", "says"), [("no RECORD", "has no RECORD"),
                                              ("a file gone", "agent.py, listed in the installed gpuscope's RECORD"),
                                              ("a garbled row", "is damaged (line ")])
def test_a_damaged_install_is_one_line(first, tmp_path, damage, says):
    dist = _broken_copy(first, tmp_path, damage)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(UserError) as caught:
        agentwheel.installed_wheel(out, dist)
    text = str(caught.value)
    assert says in text and "reinstall gpuscope" in text and "\n" not in text
    assert list(out.iterdir()) == []


def test_an_install_without_its_c_helpers_makes_a_pure_wheel(first, tmp_path):
    """Where no compiler built the two helpers, the wheel is ``py3-none-any`` from the start."""
    venv = tmp_path / "venv"
    shutil.copytree(first, venv, symlinks=True)
    record = _site(venv) / INFO / "RECORD"
    kept = []
    for line in record.read_text().splitlines():
        if line.split(",")[0].endswith(".so"):
            (_site(venv) / line.split(",")[0]).unlink()
        else:
            kept.append(line)
    record.write_text("\n".join(kept) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    wheel = agentwheel.installed_wheel(out, PathDistribution(_site(venv) / INFO))
    assert wheel.name == f"gpuscope-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert "Root-Is-Purelib: true\nTag: py3-none-any\n" in zf.read(f"{INFO}/WHEEL").decode()
        assert "gpuscope/trace/timeline.py" in zf.namelist()


def test_a_damaged_install_is_one_line_at_connect(sshd, remote_host, first, tmp_path):
    """The line reaches the user of ``gpuscope --host`` as it is, and no ssh is left behind."""
    import psutil

    venv = tmp_path / "venv"
    shutil.copytree(first, venv, symlinks=True)
    (_site(venv) / INFO / "RECORD").unlink()
    home = Path("/tmp") / f"gpuscope-xdg-{sshd.mark}-{tmp_path.name}"   # empty: the remote asks for the wheel
    home.mkdir(mode=0o755)
    os.chown(home, sshd.user.pw_uid, sshd.user.pw_gid)
    try:
        env = {**_env(tmp_path / "cache"), "GPUSCOPE_SSH": f"{sshd.ssh_env} -o SetEnv=XDG_DATA_HOME={home}"}
        proc = subprocess.run([str(venv / "bin" / "python"), "-m", "gpuscope", "--host", remote_host, "history"],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
        lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("gpuscope: building")]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith("gpuscope: error: cannot build the agent's wheel: the installed gpuscope in "
                                   f"{_site(venv)} has no RECORD"), lines
        ssh_left = [p.pid for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0].endswith("ssh")
                    and any(str(sshd.folder) in arg for arg in p.info["cmdline"])]   # clients, not the sshd
        assert ssh_left == []
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
