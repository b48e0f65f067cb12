"""The agent's ``exec`` op: a gpuscope command line run on the remote with the agent's interpreter,
its stdout and stderr streamed as events, the result its exit code.

A ``run`` command runs detached (its own session, stdin /dev/null, output into spool files the
agent tails) so that it outlives the connection; a cancel sends it SIGINT, which is its Stop.
Other commands end with their request (a cancel or a lost connection stops them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.procs.read import alive
from gpuscope.remote import protocol
from gpuscope.remote.call import user_python

if TYPE_CHECKING:
    from gpuscope.remote.call import Call

POLL_S = 0.05        # how often a detached run's spool files are read
STOP_GRACE_S = 3.0   # a cancelled command's time to end after SIGINT, before SIGTERM
READ_SIZE = 256 << 10
FOLDER_LINE = b"gpuscope: folder "   # what gpuscope run says on stderr at its end (without --quiet)


def run(call: Call) -> dict[str, Any]:
    argv = call.args.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise UserError("exec: argv is a non-empty list of strings (a gpuscope command line)")
    if argv[0] == "gui":
        raise UserError("the window runs on the workstation: gpuscope gui --host HOST")
    cwd = call.args.get("cwd")
    if cwd is not None:
        cwd = os.path.expanduser(str(cwd))
        if not os.path.isdir(cwd):
            raise UserError(f"exec: no such folder on the remote: {cwd}")
    command = [sys.executable, "-m", "gpuscope", *argv]
    if argv[0] == "run":
        if not any(a == "--python" or a.startswith("--python=") for a in argv):   # the remote's python3
            command[4:4] = ["--python", user_python()]
        return _detached(call, command, cwd)
    return _attached(call, command, cwd)


def _attached(call: Call, command: list[str], cwd: str | None) -> dict[str, Any]:
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, start_new_session=True)
    pumps = [threading.Thread(target=_pump, args=(call, name, pipe), daemon=True)
             for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for t in pumps:
        t.start()
    _wait_or_stop(call, proc)
    for t in pumps:
        t.join()
    return {"code": proc.returncode}


def _pump(call: Call, name: str, pipe: Any) -> None:
    with pipe:
        for chunk in iter(lambda: os.read(pipe.fileno(), READ_SIZE), b""):
            call.emit(name, {"b64": protocol.b64(chunk)})


def _wait_or_stop(call: Call, proc: subprocess.Popen[bytes]) -> None:
    """Wait for ``proc``; a cancel (or, here, a lost connection) stops it: SIGINT, then SIGTERM."""
    while proc.poll() is None:
        if call.wait_cancel(0.1):
            _stop(proc)
            break
    proc.wait()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def spool_dir() -> Path:
    from gpuscope import paths

    path = paths.data_dir() / "remote" / "spool"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _detached(call: Call, command: list[str], cwd: str | None) -> dict[str, Any]:
    """A run that outlives the connection: its output goes to spool files, read here as it grows."""
    sweep_spool()
    base = spool_dir()
    tag = f"{os.getpid()}-{call.id}-{threading.get_ident()}"
    paths = {name: base / f"{tag}.{name}" for name in ("stdout", "stderr")}
    files = {name: open(p, "wb", buffering=0, opener=lambda p_, f: os.open(p_, f, 0o600))
             for name, p in paths.items()}
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=files["stdout"],
                                stderr=files["stderr"], cwd=cwd, start_new_session=True)
    finally:
        for fh in files.values():
            fh.close()
    (base / f"{tag}.pid").write_text(str(proc.pid))
    offsets = {"stdout": 0, "stderr": 0}
    tails = {"stdout": b"", "stderr": b""}
    stopped = False
    while True:
        ended = proc.poll() is not None
        for name, p in paths.items():
            while data := _read_from(p, offsets[name]):
                offsets[name] += len(data)
                call.emit(name, {"b64": protocol.b64(data)})
                tails[name] = (tails[name] + data)[-(1 << 20):]
        if ended:
            break
        if call.wait_cancel(POLL_S):
            if call.disconnected:
                return {"code": None, "detached": True}   # the run goes on; its files stay until it ends
            if not stopped:
                stopped = True
                os.kill(proc.pid, signal.SIGINT)   # gpuscope run's Stop
                call.cancelled.clear()
    for p in (*paths.values(), base / f"{tag}.pid"):
        p.unlink(missing_ok=True)
    return {"code": proc.returncode, "run_id": _run_id(tails["stdout"], tails["stderr"])}


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(READ_SIZE)
    except FileNotFoundError:
        return b""


def _run_id(stdout_tail: bytes, stderr_tail: bytes = b"") -> str | None:
    """The run's id: from ``run --json``'s last line, else from its "gpuscope: folder" line."""
    for line in reversed(stdout_tail.splitlines()[-3:]):
        if line.startswith(b"{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("run_id"), str):
                return str(data["run_id"])
    for line in reversed(stderr_tail.splitlines()):
        if line.startswith(FOLDER_LINE):
            return os.path.basename(line[len(FOLDER_LINE):].decode("utf-8", "replace").strip()) or None
    return None


def sweep_spool() -> None:
    """Remove spool files of detached commands that have ended (their agent went away first)."""
    base = spool_dir()
    for pid_file in base.glob("*.pid"):
        try:
            pid = int(pid_file.read_text() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid and alive(pid):
            continue
        tag = pid_file.name[:-len(".pid")]
        for name in ("stdout", "stderr", "pid"):
            (base / f"{tag}.{name}").unlink(missing_ok=True)
