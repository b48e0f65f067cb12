"""Detached runs: a run the agent starts outlives the connection and can be watched again.

``start_run(spec)`` starts ``python -m gpuscope.remote.runhost`` in its own session; that process
runs the spec through :func:`gpuscope.api.start_run` and serves the run's live stream to watchers
over a Unix socket (0600, in a 0700 folder), listed in the index of active runs while it runs.
A watcher says from which output offsets it wants the output: what it missed is read back from
the run folder's stdout.log/stderr.log, then the live stream follows, then ``ended`` with the
record. When the run ends the process removes its index entry and socket and exits: no daemon.
The agent's side (watch, stop, the index) is :mod:`gpuscope.remote.runwatch`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from typing import IO, Any

from gpuscope import rundir
from gpuscope.errors import UserError
from gpuscope.remote import protocol
from gpuscope.remote.batchcodec import BatchWriter
from gpuscope.remote.runindex import Entry, add_entry, remove_entry, socket_path

DRAIN_S = 0.05          # the live stream's pace: well within a sample period at 10 Hz
KEEP_BATCHES = 600      # batches kept for a watcher that re-attaches (a minute at 10 Hz)
KEEP_PROGRESS = 50
SEND_TIMEOUT_S = 10.0   # a watcher that takes no data this long is dropped (it can re-attach)
FILL_CHUNK = 256 << 10

__all__ = ["RunHost", "main"]


class Watcher:
    """One attached agent: a socket written as JSON lines (one writer at a time)."""

    def __init__(self, sock: socket.socket, compact: bool = False) -> None:
        self.sock = sock
        self.alive = True
        self.writer = BatchWriter() if compact else None

    def send_batch(self, batch: dict[str, Any]) -> None:
        self.send("batch", self.writer.write(batch) if self.writer is not None else batch)

    def send(self, kind: str, data: Any) -> None:
        if not self.alive:
            return
        try:
            self.sock.sendall(protocol.encode({"event": kind, "data": data}))
        except OSError:
            self.close()

    def close(self) -> None:
        self.alive = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class RunHost:
    """One run and its watchers. The lock orders the live stream and each attach: a watcher gets
    the missed output up to the offsets sent live so far, then every live event after them."""

    def __init__(self, run: Any, stream: Any) -> None:
        self.run, self.stream = run, stream
        self.run_dir = str(run.run_folder)
        self.lock = threading.Lock()
        self.offsets = {"stdout": 0, "stderr": 0}
        self.watchers: list[Watcher] = []
        self.batches: deque[dict[str, Any]] = deque(maxlen=KEEP_BATCHES)
        self.findings: list[dict[str, Any]] = []
        self.progress: deque[str] = deque(maxlen=KEEP_PROGRESS)
        self.ended: dict[str, Any] | None = None
        self.drain_lock = threading.Lock()

    # -- the live stream ---------------------------------------------------------------------------
    def pump(self) -> None:
        """Drain the run's stream into the watchers until ``ended`` is set (then once more)."""
        while self.ended is None:
            time.sleep(DRAIN_S)
            try:
                self.drain()
            except Exception as exc:  # noqa: BLE001 - the run goes on; the failure is in the error log
                from gpuscope.remote.call import internal_line

                print(internal_line(exc, "watch_run"), file=sys.stderr)

    def drain(self) -> None:
        with self.drain_lock:   # one drain at a time: offsets follow the order the output came in
            self._drain()

    def _drain(self) -> None:
        stream = self.stream
        output, dropped = stream.drain_output()
        batches = [b.to_dict() for b in stream.drain_batches()]
        findings = [f.to_dict() for f in stream.drain_findings()]
        progress = stream.drain_progress()
        with self.lock:
            for name, (nbytes, _lines, _cut) in dropped.items():   # the buffer overflowed: the log has it
                self._send_output_from_log(self.watchers, name, self.offsets[name], self.offsets[name] + nbytes)
                self.offsets[name] += nbytes
            for name, chunk, _lines in output:
                self._broadcast("output", {"stream": name, "b64": protocol.b64(bytes(chunk)),
                                           "offset": self.offsets[name]})
                self.offsets[name] += len(chunk)
            for b in batches:
                self.batches.append(b)
                for w in self.watchers:
                    w.send_batch(b)
            for f in findings:
                self.findings.append(f)
                self._broadcast("finding", f)
            for text in progress:
                self.progress.append(text)
                self._broadcast("progress", {"text": text})

    def finish(self, record: Any) -> None:
        with self.drain_lock:   # the last output and batches, then ended: nothing can come after it
            self._drain()
            with self.lock:
                self.ended = record.to_json()
                self._broadcast("ended", self.ended)
                for w in self.watchers:
                    w.close()
                self.watchers = []

    def _broadcast(self, kind: str, data: Any) -> None:
        for w in self.watchers:
            w.send(kind, data)
        self.watchers = [w for w in self.watchers if w.alive]

    def _send_output_from_log(self, watchers: list[Watcher], name: str, start: int, end: int) -> None:
        path = os.path.join(self.run_dir, rundir.STDOUT if name == "stdout" else rundir.STDERR)
        for offset, data in read_log(path, start, end):
            for w in watchers:
                w.send("output", {"stream": name, "b64": protocol.b64(data), "offset": offset})

    # -- watchers ----------------------------------------------------------------------------------
    def attach(self, sock: socket.socket, request: dict[str, Any]) -> None:
        """A new watcher: the output it missed (from the logs), kept batches newer than its
        ``batch_seq``, the findings and progress so far, then the live stream (or ``ended``)."""
        sock.settimeout(SEND_TIMEOUT_S)
        w = Watcher(sock, compact=bool(request.get("compact")))
        offsets = request.get("offsets") or {}
        since = request.get("batch_seq")
        with self.lock:
            for name in ("stdout", "stderr"):
                start = offsets.get(name, 0) if isinstance(offsets.get(name, 0), int) else 0
                self._send_output_from_log([w], name, max(0, start), self.offsets[name])
            if isinstance(since, int):
                for b in self.batches:
                    if b["seq"] > since:
                        w.send_batch(b)
            for f in self.findings:
                w.send("finding", f)
            for text in self.progress:
                w.send("progress", {"text": text})
            if self.ended is not None:
                w.send("ended", self.ended)
                w.close()
            elif w.alive:
                self.watchers.append(w)

    def serve(self, server: socket.socket) -> None:
        while True:
            try:
                sock, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(sock,), daemon=True).start()

    def _client(self, sock: socket.socket) -> None:
        try:
            sock.settimeout(SEND_TIMEOUT_S)
            line = sock.makefile("rb").readline(1 << 20)
            request = protocol.decode(line)
        except (OSError, UserError):
            sock.close()
            return
        if request.get("op") == "stop":
            self.run.stop()
            if request.get("kill"):
                self.run.stop()   # a second stop kills at once
            try:
                sock.sendall(protocol.encode({"ok": True}))
            except OSError:
                pass
            sock.close()
            return
        self.attach(sock, request)


def read_log(path: str, start: int, end: int | None) -> list[tuple[int, bytes]]:
    """The bytes of a run's output log from ``start`` to ``end`` (None: to its end), in chunks."""
    out: list[tuple[int, bytes]] = []
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            offset = start
            while end is None or offset < end:
                data = fh.read(FILL_CHUNK if end is None else min(FILL_CHUNK, end - offset))
                if not data:
                    break
                out.append((offset, data))
                offset += len(data)
    except FileNotFoundError:
        pass
    return out


def _listen(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    server.listen(16)
    return server


def host(spec_path: str, ready: IO[bytes]) -> int:
    """Run the spec in ``spec_path``; say the run's id (or the error) on ``ready``; serve until it ends."""
    from gpuscope import api
    from gpuscope.spec import RunSpec

    path = socket_path(os.getpid())
    server = _listen(path)   # before the run starts: a run nobody could watch or stop is not started
    try:
        with open(spec_path, encoding="utf-8") as fh:
            spec = RunSpec.from_dict(json.load(fh)).validated()
        os.unlink(spec_path)
        stream = api.RunStream()
        run = api.start_run(spec, stream)
    except BaseException as exc:
        server.close()
        os.unlink(path)
        if isinstance(exc, UserError):
            _say(ready, {"error": str(exc), "kind": "user"})
            return 2
        raise
    runhost = RunHost(run, stream)
    entry = Entry(run_id=run.run_id, run_dir=runhost.run_dir, started_ns=int(run.started_ns or time.time_ns()),
                  argv=[spec.script, *spec.args], pid=os.getpid(), socket=path, program_pid=run.pid)
    add_entry(entry)
    for sig in (signal.SIGINT, signal.SIGTERM):   # a signal to the host is the run's Stop (off the handler)
        signal.signal(sig, lambda *_: threading.Thread(target=run.stop, daemon=True).start())
    _say(ready, entry.to_dict())
    threading.Thread(target=runhost.serve, args=(server,), daemon=True).start()
    pump = threading.Thread(target=runhost.pump, daemon=True)
    pump.start()
    try:
        record = run.wait()
        runhost.finish(record)
    finally:
        remove_entry(run.run_id)
        server.close()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return 0


def _say(ready: IO[bytes], message: dict[str, Any]) -> None:
    try:
        ready.write(protocol.encode(message))
        ready.close()
    except OSError:
        pass   # the agent that started us is gone: the run goes on


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m gpuscope.remote.runhost SPEC_JSON READY_FD", file=sys.stderr)
        return 2
    ready = os.fdopen(int(args[1]), "wb", buffering=0)
    try:
        return host(args[0], ready)
    except Exception as exc:  # noqa: BLE001 - one line to the agent; the details in the error log
        from gpuscope.remote.call import internal_line

        _say(ready, {"error": internal_line(exc, "start_run"), "kind": "internal"})
        return 70


if __name__ == "__main__":
    raise SystemExit(main())
