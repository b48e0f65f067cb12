"""The agent's ops on detached runs: ``start_run``, ``watch_run``, ``stop_run``, ``active_runs``.

A run is hosted by its own process (:mod:`gpuscope.remote.runhost`); these ops start it, attach
to its socket, or, once it has ended, answer from the run folder.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from gpuscope import rundir
from gpuscope.errors import UserError
from gpuscope.remote import protocol
from gpuscope.remote.call import LoggedFailureError, user_python
from gpuscope.remote.runhost import read_log
from gpuscope.remote.runindex import Entry, active_entries, find_entry

if TYPE_CHECKING:
    from gpuscope.remote.call import Call

START_TIMEOUT_S = 120.0   # a run's start may wait for the nsys lock or a slow import
POLL_S = 0.2
FOLLOW_S = 0.25       # a run without a host is followed through its logs at this pace
SETTLE_S = 600.0      # after its program ended, how long its record may take (an nsys export)
REATTACH_MAX = 100   # a host that keeps dropping this watcher: answer from the folder after this many

__all__ = ["active_runs", "start_run", "stop_run", "watch_run"]


def start_run(call: Call) -> dict[str, Any]:
    """Start ``spec`` detached; its id and folder once it runs (a bad spec: its one line)."""
    import json

    from gpuscope import paths
    from gpuscope.spec import RunSpec

    spec_d = call.arg("spec", dict)
    try:
        spec = RunSpec.from_dict(spec_d)
    except (TypeError, ValueError, KeyError) as exc:
        raise UserError(f"start_run: not a run spec ({exc})") from None
    if not spec.python:   # the remote's own python3, not the agent's private interpreter
        spec = spec._replace(python=user_python())
    folder = paths.data_dir() / "remote"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    spec_path = folder / f"spec-{os.getpid()}-{call.id}.json"
    fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(spec.to_dict(), fh)
    read_end, write_end = os.pipe()
    log = open(folder / "runhost.log", "ab")   # the host's own stray output; the run's is in its folder
    try:
        proc = subprocess.Popen([sys.executable, "-m", "gpuscope.remote.runhost", str(spec_path), str(write_end)],
                                pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    finally:
        os.close(write_end)
        log.close()
    threading.Thread(target=proc.wait, daemon=True).start()   # reaped when it ends while we run
    answer = _read_ready(read_end, proc)
    spec_path.unlink(missing_ok=True)
    if "error" in answer:
        if answer.get("kind") == "user":
            raise UserError(str(answer["error"]))
        raise LoggedFailureError(str(answer["error"]))   # the host wrote it to the error log
    return {"run_id": answer["run_id"], "run_dir": answer["run_dir"], "started_ns": answer["started_ns"],
            "program_pid": answer.get("program_pid")}


def _read_ready(fd: int, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    data = b""
    deadline = time.monotonic() + START_TIMEOUT_S
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([pipe], [], [], POLL_S)
            if ready:
                chunk = pipe.read(65536)
                if not chunk:
                    break
                data += chunk
                if data.endswith(b"\n"):
                    break
    if not data.strip():
        code = proc.poll()
        raise RuntimeError(f"the run's host process ended before the run started (exit {code})"
                           if code is not None else f"the run did not start within {START_TIMEOUT_S:g} s")
    return protocol.decode(data.strip())


def active_runs(call: Call) -> list[dict[str, Any]]:
    return [{"run_id": e.run_id, "run_dir": e.run_dir, "started_ns": e.started_ns, "argv": e.argv, "pid": e.pid,
             "program_pid": e.program_pid} for e in active_entries()]


def _connect(entry: Entry) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(entry.socket)
    except OSError:
        sock.close()
        return None
    return sock


def watch_run(call: Call) -> dict[str, Any]:
    """Events of a run from the given output offsets: live while it runs, then ``ended``; a run that
    ended already answers from its folder. A host that drops this watcher (a link too slow to
    keep up) is attached again from where the events stopped."""
    run_id = call.arg("run_id", str)
    offsets = dict(call.arg("offsets", dict, {}) or {})
    offsets = {name: int(offsets.get(name) or 0) for name in ("stdout", "stderr")}
    state: dict[str, Any] = {"batch_seq": call.arg("batch_seq", int, None), "events": 0}
    compact = bool(call.arg("compact", bool, False))
    for _ in range(REATTACH_MAX):
        entry = find_entry(run_id)
        sock = _connect(entry) if entry is not None else None
        if entry is None or sock is None:
            break
        run_id = entry.run_id
        events_before = state["events"]
        with sock:
            request = {"op": "watch", "offsets": offsets, "batch_seq": state["batch_seq"], "compact": compact}
            if _relay(call, sock, request, offsets, state):
                return {}
        if call.cancelled.is_set():
            return {"cancelled": True}
        if state["events"] == events_before:
            time.sleep(POLL_S)   # dropped before a single event: the host is ending, or struggling
    return _from_folder(call, run_id, offsets)


def _relay(call: Call, sock: socket.socket, request: dict[str, Any], offsets: dict[str, int],
           state: dict[str, Any]) -> bool:
    """Pass the host's events on until ``ended`` (True), a cancel or the host's end (False);
    ``offsets`` and ``state`` (last batch seq, events) follow what was passed on."""
    sock.sendall(protocol.encode(request))
    sock.settimeout(POLL_S)
    buf = b""
    while not call.cancelled.is_set():
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            continue
        except OSError:
            return False
        if not data:
            return False
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            message = protocol.decode(line)
            kind, payload = str(message.get("event")), message.get("data")
            if kind == "output" and isinstance(payload, dict):
                name = payload["stream"]
                end = payload["offset"] + len(protocol.unb64(payload["b64"]))
                if end <= offsets.get(name, 0):
                    continue
                offsets[name] = end
            elif kind == "batch" and isinstance(payload, dict):
                state["batch_seq"] = payload.get("seq")
            state["events"] += 1
            call.emit(kind, payload)
            if kind == "ended":
                return True
    return False


def _from_folder(call: Call, run_id: str, offsets: dict[str, int]) -> dict[str, Any]:
    """A run nobody hosts: the output after ``offsets`` from its logs, then ``ended``. One that
    still runs (started by ``exec`` or on the remote) is followed through its logs until its
    record says it ended (or a cancel)."""
    from gpuscope import api

    record = api.open_run(run_id)
    settle_until = None
    while not record.ended_ns and not call.cancelled.is_set():
        _emit_logs(call, record.run_folder, offsets)
        if settle_until is None and api.main_exited(record.run_folder):
            settle_until = time.monotonic() + SETTLE_S   # the program ended: its record follows
        if settle_until is not None and time.monotonic() > settle_until:
            break
        call.wait_cancel(FOLLOW_S)
        record = api.open_run(record.run_id)
    if call.cancelled.is_set():
        return {"cancelled": True}
    _emit_logs(call, record.run_folder, offsets)
    call.emit("ended", record.to_json())
    return {}


def _emit_logs(call: Call, run_dir: str, offsets: dict[str, int]) -> None:
    for name, log in (("stdout", rundir.STDOUT), ("stderr", rundir.STDERR)):
        for offset, data in read_log(os.path.join(run_dir, log), offsets[name], None):
            call.emit("output", {"stream": name, "b64": protocol.b64(data), "offset": offset})
            offsets[name] = offset + len(data)


def stop_run(call: Call) -> dict[str, Any]:
    """Stop a hosted run (``kill``: at once); its watchers then get ``ended``."""
    run_id = call.arg("run_id", str)
    kill = bool(call.args.get("kill"))
    entry = find_entry(run_id)
    sock = _connect(entry) if entry is not None else None
    if sock is None:
        raise UserError(f"run {run_id} is not running on this host")
    with sock:
        sock.settimeout(10)
        sock.sendall(protocol.encode({"op": "stop", "kill": kill}))
        try:
            sock.recv(4096)
        except OSError:
            pass
    return {}
