"""The workstation's one connection to an agent: requests multiplexed by id over a byte pipe.

One reader thread reads the agent's lines: events go to their request's ``on_event`` (called on
that thread: keep it short, hand work off), a reply completes its request. A lost connection fails
every pending request with one line and calls the ``on_closed`` callbacks. Standard library only.
"""

from __future__ import annotations

import io
import itertools
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import IO, Any

from gpuscope.remote import protocol
from gpuscope.remote.protocol import ConnectionLostError, ProtocolError, RemoteError

EventHandler = Callable[[str, Any], None]
HELLO_TIMEOUT_S = 60.0   # the bootstrap may install the agent first
CLOSE_GRACE_S = 3.0
LOST = "the connection to {host} was lost"

__all__ = ["Connection", "Pending", "connect_local"]


class Pending:
    """One request in flight: ``wait()`` for its result, ``cancel()`` to end its stream."""

    def __init__(self, conn: Connection, req_id: int, op: str, on_event: EventHandler | None) -> None:
        self.conn, self.id, self.op, self.on_event = conn, req_id, op, on_event
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        """The result (blocking); the agent's error raised as one line; on ``timeout``, the
        request is cancelled and a RemoteError says how long it waited."""
        if threading.current_thread() is self.conn._thread and not self._done.is_set():
            raise RuntimeError("a request waited for on the connection's reader thread (in on_event) never ends")
        if not self._done.wait(timeout):
            self.cancel()
            raise RemoteError(f"{self.conn.host}: {self.op} did not answer within {timeout:g} s")
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        """Ask the agent to end this request (its reply still follows)."""
        if not self._done.is_set():
            self.conn._send_cancel(self.id)

    def _finish(self, result: Any = None, error: BaseException | None = None) -> None:
        if not self._done.is_set():
            self._result, self._error = result, error
            self._done.set()


class Connection:
    """An agent's connection over ``proc``'s stdin/stdout (or ``reader``/``writer`` byte pipes).

    ``host`` names the other side in messages. ``on_preamble`` receives each line that comes
    before the hello (a bootstrap's progress). The constructor waits for the hello and checks it."""

    def __init__(self, proc: subprocess.Popen[bytes] | None = None, *, host: str = "the agent",
                 reader: IO[bytes] | None = None, writer: IO[bytes] | None = None,
                 on_preamble: Callable[[str], None] | None = None,
                 hello_timeout: float = HELLO_TIMEOUT_S) -> None:
        self.proc, self.host = proc, host
        self._reader = reader if reader is not None else (proc.stdout if proc is not None else None)
        if isinstance(self._reader, io.RawIOBase):   # an unbuffered pipe: readline would read byte by byte
            self._reader = io.BufferedReader(self._reader, 1 << 16)
        self._writer = writer if writer is not None else (proc.stdin if proc is not None else None)
        if self._reader is None or self._writer is None:
            raise ValueError("Connection needs a process with pipes or a reader and a writer")
        self._on_preamble = on_preamble
        self._ids = itertools.count(1)
        self._lock = threading.Lock()          # pending table and closed state
        self._write_lock = threading.Lock()
        self._pending: dict[int, Pending] = {}
        self._closed_cbs: list[Callable[[str], None]] = []
        self._closed: str | None = None        # why, once closed
        self._hello_seen = threading.Event()
        self._hello_error: BaseException | None = None
        self.hello: dict[str, Any] = {}
        self._stderr_tail: deque[bytes] = deque(maxlen=20)
        # the ssh transport reads its own stderr (its exit_reason() says why a link ended)
        if proc is not None and proc.stderr is not None and not hasattr(proc, "exit_reason"):
            threading.Thread(target=self._drain_stderr, name="gpuscope-agent-stderr", daemon=True).start()
        self._thread = threading.Thread(target=self._read_loop, name="gpuscope-agent-reader", daemon=True)
        self._thread.start()
        self._await_hello(hello_timeout)

    # -- public ----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed is not None

    def stderr_tail(self) -> str:
        """The last lines the agent's process wrote on stderr (for a failure's message)."""
        return b"".join(self._stderr_tail).decode("utf-8", "replace")

    def on_closed(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` once when the connection ends (at once if it has)."""
        with self._lock:
            if self._closed is None:
                self._closed_cbs.append(callback)
                return
            reason = self._closed
        callback(reason)

    def start(self, op: str, args: dict[str, Any] | None = None,
              on_event: EventHandler | None = None) -> Pending:
        """Send a request without waiting; the returned handle waits or cancels."""
        with self._lock:
            req_id = next(self._ids)
            pending = Pending(self, req_id, op, on_event)
            if self._closed is not None:
                pending._finish(error=ConnectionLostError(self._lost_text()))
                return pending
            self._pending[req_id] = pending
        try:
            self._write(protocol.request(req_id, op, args))
        except ConnectionLostError as exc:
            with self._lock:
                self._pending.pop(req_id, None)
            pending._finish(error=exc)
        return pending

    def request(self, op: str, args: dict[str, Any] | None = None, on_event: EventHandler | None = None,
                timeout: float | None = None) -> Any:
        """Send a request and block for its result (events, if any, go to ``on_event``)."""
        return self.start(op, args, on_event).wait(timeout)

    def close(self) -> None:
        """End the connection: the agent sees end of input and exits (detached runs go on)."""
        self._lose("the connection to {host} was closed")
        try:
            self._writer.close()  # type: ignore[union-attr]
        except OSError:
            pass
        proc = self.proc
        if proc is None:
            return
        try:
            proc.wait(CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(CLOSE_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------
    def _await_hello(self, timeout: float) -> None:
        if not self._hello_seen.wait(timeout):
            self.close()
            raise ProtocolError(f"{self.host}: the agent did not say hello within {timeout:g} s"
                                + self._stderr_hint())
        if self._hello_error is not None:
            self.close()
            raise self._hello_error

    def _stderr_hint(self) -> str:
        lines = [ln for ln in self.stderr_tail().splitlines() if ln.strip()]
        return f" ({lines[-1].strip()})" if lines else ""

    def _lost_text(self) -> str:
        return (self._closed or "the connection to {host} was lost").format(host=self.host)

    def _write(self, message: dict[str, Any]) -> None:
        data = protocol.encode(message)
        with self._write_lock:
            try:
                self._writer.write(data)  # type: ignore[union-attr]
                self._writer.flush()  # type: ignore[union-attr]
            except (OSError, ValueError):
                self._lose("the connection to {host} was lost")
                raise ConnectionLostError(self._lost_text()) from None

    def _send_cancel(self, target: int) -> None:
        with self._lock:
            if self._closed is not None:
                return
            req_id = next(self._ids)
        try:
            self._write(protocol.cancel(req_id, target))
        except ConnectionLostError:
            pass

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self._stderr_tail.append(line[-2000:])

    def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                line = reader.readline(protocol.MAX_LINE)
                if not line:
                    break
                if not self._hello_seen.is_set():
                    self._on_first_lines(line)
                    continue
                self._dispatch(protocol.decode(line))
        except (OSError, ValueError):
            pass
        except ProtocolError as exc:
            self._lose(f"the connection to {{host}} broke: {exc}")
        finally:
            reason = self._lost_reason()
            if not self._hello_seen.is_set():
                if reason != LOST:   # the transport said why (ssh: refused key, unknown host, ...)
                    self._hello_error = ConnectionLostError(reason.format(host=self.host))
                else:
                    self._hello_error = ProtocolError(f"{self.host}: the agent ended before its hello"
                                                      + self._stderr_hint_after_exit())
                self._hello_seen.set()
            self._lose(reason)

    def _lost_reason(self) -> str:
        """Why the link ended: the transport's own line (ssh's exit_reason) when it has one."""
        explain = getattr(self.proc, "exit_reason", None)
        if callable(explain):
            try:
                self.proc.wait(2.0)  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                pass
            try:
                line = explain()
            except Exception:  # noqa: BLE001 - the generic line is still right
                line = None
            if line:
                return str(line).replace("{", "{{").replace("}", "}}")
        return LOST

    def _stderr_hint_after_exit(self) -> str:
        if self.proc is not None:
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                pass
        return self._stderr_hint()

    def _on_first_lines(self, line: bytes) -> None:
        try:
            message = protocol.decode(line)
        except ProtocolError:
            message = None
        if message is None or "hello" not in message:
            if self._on_preamble is not None:
                self._on_preamble(line.decode("utf-8", "replace").rstrip("\n"))
            return
        try:
            self.hello = protocol.check_hello(message, self.host)
        except ProtocolError as exc:
            self._hello_error = exc
        self._hello_seen.set()

    def _dispatch(self, message: dict[str, Any]) -> None:
        req_id = message.get("id")
        with self._lock:
            pending = self._pending.get(req_id) if isinstance(req_id, int) else None
            if pending is not None and "event" not in message:
                del self._pending[req_id]  # type: ignore[arg-type]
        if pending is None:
            return   # a late event of a cancelled or timed-out request
        if "event" in message:
            if pending.on_event is not None:
                try:
                    pending.on_event(str(message["event"]), message.get("data"))
                except Exception as exc:  # noqa: BLE001 - a handler's bug must not end the reader
                    print(f"gpuscope: event handler of {pending.op} failed: {exc!r}", file=sys.stderr)
            return
        try:
            pending._finish(protocol.raise_for(message, self.host))
        except RemoteError as exc:
            pending._finish(error=exc)

    def _lose(self, reason: str) -> None:
        """Mark closed once: fail every pending request, then call the on_closed callbacks."""
        with self._lock:
            if self._closed is not None:
                return
            self._closed = reason
            pending, self._pending = list(self._pending.values()), {}
            callbacks, self._closed_cbs = self._closed_cbs, []
        text = self._lost_text()
        for p in pending:
            p._finish(error=ConnectionLostError(text))
        for cb in callbacks:
            try:
                cb(text)
            except Exception as exc:  # noqa: BLE001 - one bad callback must not hide the others
                print(f"gpuscope: on_closed callback failed: {exc!r}", file=sys.stderr)


def connect_local(python: str = sys.executable, env: dict[str, str] | None = None,
                  host: str = "local agent") -> Connection:
    """An agent started here as a plain subprocess (tests; the same code path as over ssh)."""
    proc = subprocess.Popen([python, "-m", "gpuscope.remote.agent"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        return Connection(proc, host=host)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        raise
