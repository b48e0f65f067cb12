"""The agent: ``python -m gpuscope.remote.agent`` on the remote host, speaking the protocol on its
stdin/stdout (docs/REMOTE.md).

Its first line is the hello; then each request runs on its own thread, and every line it writes
goes through one lock. Nothing else reaches stdout: the wire is a private copy of the descriptor
and descriptor 1 becomes stderr, so stray prints (of what it calls, or of child processes) cannot
break the framing. At end of input it ends its streams and exits; detached runs go on. No
traceback reaches the wire: an unexpected failure is one line, its details in gpuscope's error log.
Nothing here may import Qt: the remote has no display and often no PySide6.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from gpuscope import __version__
from gpuscope.errors import UserError
from gpuscope.remote import protocol
from gpuscope.remote.call import Call, LoggedFailureError, hello, internal_line

END_GRACE_S = 3.0   # how long streams get to end after the workstation went away

__all__ = ["Agent", "main"]


class Agent:
    """The request loop over ``reader``/``writer``; ``ops`` maps an op name to ``fn(call) -> result``."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes],
                 ops: dict[str, Callable[[Call], Any]] | None = None) -> None:
        if ops is None:
            from gpuscope.remote.ops import OPS

            ops = OPS
        self.reader, self.writer, self.ops = reader, writer, ops
        self.disconnected = threading.Event()
        self._write_lock = threading.Lock()
        self._calls: dict[int, Call] = {}
        self._calls_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def send(self, message: dict[str, Any]) -> None:
        data = protocol.encode(message)
        with self._write_lock:
            try:
                self.writer.write(data)
                self.writer.flush()
            except (OSError, ValueError):
                self.disconnected.set()   # the workstation is gone: streams end, runs go on

    def serve(self) -> int:
        """Say hello, answer requests until end of input, let the streams end; the exit code."""
        self.send(hello())
        while not self.disconnected.is_set():
            try:
                line = self.reader.readline(protocol.MAX_LINE)
            except (OSError, ValueError):
                break
            if not line:
                break
            self._handle_line(line)
        self.disconnected.set()
        with self._calls_lock:
            calls = list(self._calls.values())
        for call in calls:
            call.cancelled.set()
        deadline = time.monotonic() + END_GRACE_S
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        return 0

    def _handle_line(self, line: bytes) -> None:
        try:
            message = protocol.decode(line)
        except protocol.ProtocolError as exc:
            self.send(protocol.error_reply(-1, str(exc)))
            return
        req_id, op, args = message.get("id"), message.get("op"), message.get("args")
        if not isinstance(req_id, int) or not isinstance(op, str):
            self.send(protocol.error_reply(req_id if isinstance(req_id, int) else -1,
                                           "a request needs an integer id and an op"))
            return
        if not isinstance(args, dict):
            args = {}
        if op == "cancel":
            self._cancel(req_id, args.get("target"))
            return
        call = Call(self.send, self.disconnected, req_id, op, args)
        with self._calls_lock:
            self._calls[req_id] = call
        thread = threading.Thread(target=self._answer, args=(call,), name=f"gpuscope-op-{op}", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _cancel(self, req_id: int, target: Any) -> None:
        with self._calls_lock:
            call = self._calls.get(target) if isinstance(target, int) else None
        if call is not None:
            call.cancelled.set()
        self.send(protocol.ok_reply(req_id, {"cancelled": call is not None}))

    def _answer(self, call: Call) -> None:
        try:
            fn = self.ops.get(call.op)
            if fn is None:
                raise UserError(f"unknown op {call.op!r} (this agent is gpuscope {__version__}, "
                                f"protocol {protocol.PROTOCOL})")
            reply = protocol.ok_reply(call.id, fn(call))
        except UserError as exc:
            reply = protocol.error_reply(call.id, str(exc), "user")
        except LoggedFailureError as exc:
            reply = protocol.error_reply(call.id, str(exc), "internal")
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                reply = protocol.error_reply(call.id, internal_line(exc, call.op), "internal")
            else:   # the remote's disk (or quota) is full: the user can act on that
                where = f" ({exc.filename})" if exc.filename else ""
                reply = protocol.error_reply(call.id, f"{call.op}: no space left on the remote's disk{where}", "user")
        except Exception as exc:  # noqa: BLE001 - never a traceback on the wire: one line, a log
            reply = protocol.error_reply(call.id, internal_line(exc, call.op), "internal")
        finally:
            with self._calls_lock:
                self._calls.pop(call.id, None)
        try:
            protocol.encode(reply)
        except (TypeError, ValueError) as exc:   # a result that is not JSON data: a bug, said in one line
            reply = protocol.error_reply(call.id, internal_line(exc, call.op), "internal")
        self.send(reply)


def _take_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """The wire (private copies of stdin and stdout); descriptor 1 then writes to stderr and
    descriptor 0 reads /dev/null, so nothing the agent or its children do touches the wire."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    os.set_inheritable(wire_in.fileno(), False)
    os.set_inheritable(wire_out.fileno(), False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return wire_in, wire_out


def main() -> int:
    reader, writer = _take_stdio()
    return Agent(reader, writer).serve()


if __name__ == "__main__":
    raise SystemExit(main())
