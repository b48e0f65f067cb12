"""Start the agent on a remote host over one ssh connection, installing it first when needed.

The remote command runs the remote's ``python3`` (else ``python``; ``GPUSCOPE_REMOTE_PYTHON``
names another) with a short ``-c`` program that refuses Python < 3.10 and reads THIS file's source
from stdin, length-prefixed, so the rest of stdin stays the channel. That source runs as the
bootstrap (:func:`remote_main`): it finds the agent's virtual environment in the remote user's data
folder, installs or updates it with the wheel the workstation sends over the same channel, then
``os.execv``'s the agent, which keeps stdin/stdout: one connection. The exchange is in
docs/REMOTE.md ("Connect", "Install").

This file is also the program the remote runs before gpuscope exists there: the module level uses
the standard library only, and the workstation's imports of gpuscope are guarded below (the wheel
it sends is made by gpuscope/remote/agentwheel.py).
"""

from __future__ import annotations

import base64
import errno
import fcntl
import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

REMOTE_NAME = "gpuscope_bootstrap"   # __name__ when this source runs on the remote
if __name__ != REMOTE_NAME:   # on the remote this file runs alone, before gpuscope is installed there
    from gpuscope import __version__
    from gpuscope.errors import UserError
    from gpuscope.remote import ssh
    from gpuscope.remote.agentwheel import Progress, agent_build, agent_wheel
    from gpuscope.remote.hostspec import HostSpec

MIN_PYTHON = (3, 10)
PYTHON_ENV = "GPUSCOPE_REMOTE_PYTHON"
USER_PYTHON_ENV = "GPUSCOPE_USER_PYTHON"   # gpuscope.remote.call.USER_PYTHON_ENV (not importable there yet)
MARKER = "gpuscope-agent.json"   # written last in the agent's venv: its presence means complete
# Not installed on a remote: it has no display.
NOT_ON_REMOTE = ("pyside6", "pyqtgraph", "shiboken6")
IDLE_TIMEOUT_S = 300.0   # no line from the remote for this long: a pip download hung
FAILED = 3               # the bootstrap's own exit status
KEEP_BUILDS = 3          # agent folders kept per version: a run started from an older one may still go on
FULL_BELOW = 8 << 20     # free bytes under which a failed install step is taken for a full disk

# ---------------------------------------------------------------------------------------------
# The remote side (standard library only; runs under the remote's python3).


def _send(**message: Any) -> None:
    os.write(1, (json.dumps(message) + "\n").encode("utf-8"))


def _read_exact(n: int) -> bytes:
    """``n`` bytes of stdin, unbuffered: what follows stays for the agent."""
    chunks, left = [], n
    while left:
        chunk = os.read(0, min(left, 1 << 20))
        if not chunk:
            raise SystemExit(FAILED)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_line() -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(0, 1)
        if not c:
            raise SystemExit(FAILED)
        line += c
    return line


def _fail(text: str, venv: Path | None = None) -> None:
    if venv is not None:
        shutil.rmtree(venv, ignore_errors=True)
    _send(bootstrap="error", text=text)
    raise SystemExit(FAILED)


def agent_root(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """The agents' folder in this user's data folder (the XDG rule, as gpuscope.paths)."""
    base = environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gpuscope" / "agent"


def _marker(venv: Path) -> dict[str, Any]:
    try:
        data = json.loads((venv / MARKER).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and os.access(venv / "bin" / "python", os.X_OK) else {}
    except (OSError, ValueError):
        return {}


def _python_tag() -> str:
    """This Python's wheel tags, as ``cp311-linux_x86_64``."""
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"cp{sys.version_info[0]}{sys.version_info[1]}-{platform}"


def remote_main() -> None:
    """The bootstrap: exec the agent, installing or updating it first."""
    want = json.loads(_read_line())
    root = agent_root()
    venv = root / f"{want['version']}-{want['build']}"   # never changed once made: runs from it go on
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = open(root / ".install.lock", "a")   # closed by the exec (close-on-exec): the lock goes with it
    except OSError as exc:
        _fail(f"cannot write the agent's folder {root}: {exc.strerror}")
    fcntl.flock(lock, fcntl.LOCK_EX)
    if _marker(venv).get("build") != want["build"]:
        builds = _builds(root, want["version"])
        base = builds[0] if builds else None
        why = "different" if base else "incomplete" if venv.exists() else "missing"
        _send(bootstrap="need-wheel", why=why, python=_python_tag(), found=base.name if base else None)
        _install(venv, base, want)
        for old in _builds(root, want["version"])[KEEP_BUILDS:]:
            shutil.rmtree(old, ignore_errors=True)
    _send(bootstrap="exec", agent=str(venv))
    os.environ[USER_PYTHON_ENV] = sys.executable   # the user's Python there: the agent's runs default to it
    python = str(venv / "bin" / "python")
    os.execv(python, [python, "-m", "gpuscope.remote.agent"])


def _builds(root: Path, version: str) -> list[Path]:
    """The complete agent folders of ``version`` (one per build), newest first."""
    found = []
    for folder in root.glob(f"{version}*"):
        if folder.name == version or folder.name.startswith(f"{version}-"):
            if _marker(folder):
                found.append(((folder / MARKER).stat().st_mtime, folder))
    return [folder for _, folder in sorted(found, reverse=True)]


def _install(venv: Path, base: Path | None, want: dict[str, Any]) -> None:
    """A new folder for this build: a fresh venv, or a copy of another build's (its dependencies
    stay) with this build's gpuscope installed over it."""
    started = time.monotonic()
    header = json.loads(_read_line())
    incoming = venv.parent / f".incoming-{os.getpid()}"   # pip reads the wheel's tags from its name
    wheel = incoming / os.path.basename(header["name"])
    try:
        incoming.mkdir(exist_ok=True)
        wheel.write_bytes(_read_exact(int(header["size"])))
    except OSError as exc:
        shutil.rmtree(incoming, ignore_errors=True)
        _fail(f"cannot receive the agent's wheel into {venv.parent}: {exc.strerror}")
    try:
        shutil.rmtree(venv, ignore_errors=True)
        if base is None:
            _step("creating the virtual environment", 0.05, [sys.executable, "-m", "venv", str(venv)], venv)
        else:
            _send(bootstrap="progress", text=f"copying the environment of {base.name}", fraction=0.05)
            shutil.copytree(base, venv, symlinks=True)
            (venv / MARKER).unlink()
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
        _step(f"installing gpuscope {want['version']}", 0.2,
              [*pip, "--no-deps", "--force-reinstall", str(wheel)], venv)
        deps = _core_requirements(wheel)
        if base is None and deps:
            _step("installing " + ", ".join(_names(deps)), 0.3, [*pip, *deps], venv)
        (venv / MARKER).write_text(json.dumps({"version": want["version"], "build": want["build"]}))
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            _fail(f"the remote's disk is full (No space left on device) while installing in {venv.parent}", venv)
        _fail(f"cannot install the agent into {venv}: {exc.strerror}", venv)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    what = "installed" if base is None else "updated"
    _send(bootstrap="installed", text=f"{what} gpuscope {want['version']} in {venv} "
                                      f"({time.monotonic() - started:.0f} s)")


def _step(text: str, fraction: float, argv: list[str], venv: Path) -> None:
    """Run one install step, its output streamed as progress; a failure is one line (and the
    half-made ``venv`` is removed)."""
    _send(bootstrap="progress", text=text, fraction=fraction)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env)
    assert proc.stdout is not None
    errors: list[str] = []
    tail: list[str] = []
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip()
        if not line:
            continue
        tail = [*tail[-4:], line]
        if line.startswith("ERROR") or "No space left" in line:
            errors.append(line)
        _send(bootstrap="progress", text=line, fraction=None)
    if proc.wait() != 0:
        said = " ".join(tail + errors)
        # venv hides ensurepip's own error: a failed step on an (almost) full disk is the full disk
        if "No space left on device" in said or _free_bytes(venv) < FULL_BELOW:
            _fail(f"the remote's disk is full (No space left on device) while {text.lower()} in {venv.parent}",
                  venv)
        last = (errors or tail or [f"exit {proc.returncode}"])[-1]
        _fail(f"{text} failed: {last.removeprefix('ERROR: ')}", venv)


def _free_bytes(path: Path) -> int:
    """Free bytes on the file system of ``path`` (or of the nearest folder above it that exists)."""
    for folder in (path, *path.parents):
        try:
            st = os.statvfs(folder)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return 1 << 62


def _core_requirements(wheel: Path) -> list[str]:
    """gpuscope's dependencies from the wheel's metadata, without extras and without Qt."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode("utf-8")
    reqs = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req or _names([req])[0].lower().startswith(NOT_ON_REMOTE):
            continue
        reqs.append(req)
    return reqs


def _names(reqs: list[str]) -> list[str]:
    out = []
    for req in reqs:
        end = next((i for i, c in enumerate(req) if not (c.isalnum() or c in "-_.")), len(req))
        out.append(req[:end])
    return out


# ---------------------------------------------------------------------------------------------
# The workstation side.

# Stage 0 arrives as ``python -c LOADER <stage 0, base64> search|named``.
LOADER = "import base64,sys;exec(base64.b64decode(sys.argv[1]))"
NEWER_PYTHONS = ("python3.14", "python3.13", "python3.12", "python3.11", "python3.10")
# Runs under any Python (2 too): an old one hands over to a newer one on PATH when the user named
# none, else refuses; then it reads the bootstrap (which needs 3.10) from stdin, length-prefixed.
_REMOTE_STAGE0 = """\
import sys,os
v=sys.version_info
if v<(3,10):
 if sys.argv[2:3]==["search"]:
  for n in NEWER:
   for d in os.environ.get("PATH","").split(os.pathsep):
    f=os.path.join(d,n)
    if d and os.access(f,os.X_OK):os.execv(f,[f,"-c",LOADER,sys.argv[1],"named"])
 t="the remote Python %d.%d.%d (%s) is too old: gpuscope needs Python >= 3.10"%(v[0],v[1],v[2],sys.executable)
 t+=" (install one, or name it with GPUSCOPE_REMOTE_PYTHON)"
 os.write(1,('{"bootstrap":"error","text":"%s"}\\n'%t).encode());sys.exit(3)
h=b""
while not h.endswith(b"\\n"):
 c=os.read(0,1)
 if not c:sys.exit(3)
 h+=c
n=int(h);s=b""
while len(s)<n:
 c=os.read(0,n-len(s))
 if not c:sys.exit(3)
 s+=c
exec(compile(s,"gpuscope-bootstrap","exec"),{"__name__":"gpuscope_bootstrap"})
""".replace("NEWER", repr(NEWER_PYTHONS)).replace("LOADER", repr(LOADER))


def remote_command(python: str | None = None) -> str:
    """The line the remote's login shell runs: ``sh`` finds a Python that runs stage 0. One line
    of plain words and quotes, so csh, tcsh and fish users' shells pass it on to sh as well."""
    stage0 = base64.b64encode(_REMOTE_STAGE0.encode()).decode("ascii")
    python = python or os.environ.get(PYTHON_ENV, "").strip() or None
    if python:
        script = f"exec {shlex.quote(python)} -c {shlex.quote(LOADER)} {stage0} named"
    else:
        missing = json.dumps({"bootstrap": "error", "text": "no python3 or python on the PATH of the remote: "
                              "gpuscope needs Python >= 3.10 there (or name it with GPUSCOPE_REMOTE_PYTHON)"})
        names = " ".join(("python3", "python", *NEWER_PYTHONS))
        script = (f"for p in {names}; do if command -v $p >/dev/null 2>&1; then "
                  f"exec $p -c {shlex.quote(LOADER)} {stage0} search; fi; done; "
                  f"echo {shlex.quote(missing)}; exit {FAILED}")
    return f"exec sh -c {shlex.quote(script)}"


class AgentProcess(subprocess.Popen):
    """The ssh process whose stdin/stdout are the agent's (after :func:`open_agent`)."""

    host: HostSpec
    stderr_text: str = ""   # the last of ssh's stderr (the remote's stderr comes with it)
    started: bool = False   # the agent was started: a later end is a lost connection

    def exit_reason(self) -> str:
        """One line: why the connection ended (ssh's own failure, or the agent's exit)."""
        code = self.poll()
        if code is None:
            return f"the connection to {self.host} is open"
        if not self.started and code == ssh.SSH_FAILED:
            return ssh.describe_failure(self.host, self.stderr_text)
        last = next((ln.strip() for ln in reversed(self.stderr_text.splitlines()) if ln.strip()), "")
        how = last or (f"ssh killed by signal {-code}" if code < 0 else f"exit {code}")
        return f"the connection to {self.host} was lost ({how})"

    def _drain_stderr(self) -> None:
        """Keep reading ssh's stderr once the agent runs (a full pipe would stop the agent)."""
        assert self.stderr is not None
        fd = self.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.stderr_text = (self.stderr_text + chunk.decode("utf-8", "replace"))[-16384:]


def open_agent(host: HostSpec, progress: Progress | None = None, timeout: float | None = None) -> AgentProcess:
    """Connect to ``host`` with ssh, install the agent there if needed, start it: the returned
    process's stdout's next line is the agent's hello. A failure is one UserError line."""
    ssh.check_usable()
    version, build = __version__, agent_build()
    proc = AgentProcess(ssh.ssh_argv(host, remote_command()), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True)   # Ctrl-C is ours to send as a cancel
    proc.host = host
    try:
        program = Path(__file__).read_bytes()
        params = json.dumps({"version": version, "build": build}).encode() + b"\n"
        _write(proc, b"%d\n" % len(program) + program + params)
        _converse(proc, host, version, build, progress, timeout or IDLE_TIMEOUT_S)
    except BaseException:
        _kill(proc)
        raise
    proc.started = True
    threading.Thread(target=proc._drain_stderr, name="gpuscope-ssh-stderr", daemon=True).start()
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def _write(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass   # ssh ended: its exit status and stderr say why, read next


def _converse(proc: AgentProcess, host: HostSpec, version: str, build: str, progress: Progress | None,
              idle_timeout: float) -> None:
    """Read the bootstrap's lines until it execs the agent (or fails: one UserError line)."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    line, err = b"", b""
    while True:
        ready, _, _ = select.select([out_fd, err_fd] if err_fd >= 0 else [out_fd], [], [], idle_timeout)
        if not ready:
            raise UserError(f"{host}: the remote did not answer for {idle_timeout:g} s while starting the agent")
        if err_fd in ready:
            chunk = os.read(err_fd, 65536)   # ssh's stderr: never read past what is there
            err = (err + chunk)[-65536:]
            proc.stderr_text = err.decode("utf-8", "replace")
            if not chunk:
                err_fd = -1
            continue
        c = os.read(out_fd, 1)   # one byte at a time: the agent's lines after "exec" stay in the pipe
        if not c:
            raise UserError(_ended(proc, host))
        line += c
        if c == b"\n":
            message, line = _parse(line), b""
            if message is not None and _handle(proc, host, version, build, message, progress):
                return


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None   # a remote shell's startup file may print: not ours
    return message if isinstance(message, dict) and "bootstrap" in message else None


def _handle(proc: AgentProcess, host: HostSpec, version: str, build: str, message: dict[str, Any],
            progress: Progress | None) -> bool:
    """Act on one bootstrap line; True once the agent is being started."""
    kind = message["bootstrap"]
    fraction = message.get("fraction")
    if kind == "error":
        raise UserError(f"{host}: {message.get('text', 'the bootstrap failed')}")
    if kind == "need-wheel":
        wheel = agent_wheel(str(message.get("python", "")), progress)
        why = {"missing": "not installed", "different": "another build"}.get(str(message.get("why")), "incomplete")
        if progress is not None:
            progress(f"installing the agent on {host} (gpuscope {version} {why} there): "
                     f"sending {wheel.name} ({wheel.stat().st_size // 1024} KiB)", 0.02)
        data = wheel.read_bytes()
        _write(proc, json.dumps({"name": wheel.name, "size": len(data)}).encode() + b"\n" + data)
    elif kind in ("progress", "installed") and progress is not None:
        progress(str(message.get("text", "")), 1.0 if kind == "installed" else
                 float(fraction) if isinstance(fraction, (int, float)) else None)
    return bool(kind == "exec")


def _ended(proc: AgentProcess, host: HostSpec) -> str:
    """Why ssh ended before the agent started."""
    try:
        code = proc.wait(10)
    except subprocess.TimeoutExpired:
        code = None
    assert proc.stderr is not None
    try:
        rest = proc.stderr.read() or b""
    except (OSError, ValueError):
        rest = b""
    stderr = proc.stderr_text + rest.decode("utf-8", "replace")
    proc.stderr_text = stderr
    if code == ssh.SSH_FAILED:
        return ssh.describe_failure(host, stderr)
    last = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
    if code == 127 or "not found" in last:
        return f"{host}: the remote cannot start Python ({last or 'not found'})"
    return f"{host}: the agent's bootstrap ended (exit {code}){': ' + last if last else ''}"


if __name__ == REMOTE_NAME:
    remote_main()
