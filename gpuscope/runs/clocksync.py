"""How far one node's wall clock is from the job's reference node: a short TCP exchange.

Node rank 0's gpuscope serves its wall clock on a TCP port (``ClockServer``); it publishes where in
the job folder (``clock-<job id>.json``: host, port, its pid), which every node shares anyway.
Every other node's gpuscope connects and asks ``ROUNDS`` times (``measure``): it reads its own
clock before (t0) and after (t3) each answer (ts), so for that round

    offset = (t0 + t3) / 2 - ts        (this node's clock minus the reference's)
    error  <= (t3 - t0) / 2            (the answer was read somewhere inside the round trip)

The round with the shortest round trip wins; its half round trip is the residual reported. The
exchange is made when the program has started and again when it has ended (node 0 serves until
its own run is finished): two offsets give the drift between the clocks, corrected linearly.

Why a TCP exchange of gpuscope's own rather than the c10d store torchrun's rendezvous provides:
the store lives in the torchrun agent, a process gpuscope does not own, and reaching it takes
``import torch`` in gpuscope (seconds, and the job's interpreter may not be gpuscope's). This runs
in gpuscope's process, beside the program, with the standard library only.

``GPUSCOPE_TEST_CLOCK_SHIFT_NS`` (tests only) shifts every wall-clock reading gpuscope takes here,
as if this node's clock were off by that much: the exchange must find it again.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

SHIFT_ENV = "GPUSCOPE_TEST_CLOCK_SHIFT_NS"
ROUNDS = 16
MAGIC = b"GSC1"
_ANSWER = struct.Struct("<4sq")      # MAGIC again, then the wall clock: a stranger's bytes are refused


def _shift() -> int:
    try:
        return int(os.environ.get(SHIFT_ENV) or 0)
    except ValueError:
        return 0


def wall_ns() -> int:
    """This node's wall clock (epoch ns), as gpuscope reads it (shifted by the test hook)."""
    return time.time_ns() + _shift()


def anchor() -> tuple[int, int]:
    """(wall ns, CLOCK_MONOTONIC ns) read together: maps the node's event-log times to its wall clock."""
    m0 = time.perf_counter_ns()
    w = wall_ns()
    m1 = time.perf_counter_ns()
    return w, (m0 + m1) // 2


@dataclass(frozen=True)
class ClockMeasure:
    """This node's clock minus the reference node's, and how sure that is."""

    offset_ns: int
    residual_ns: int | None      # half the shortest round trip: the bound on the offset's error
    rounds: int
    reference: str               # host:port asked, or "self" for the reference node
    error: str | None = None     # why there is no measure (offset 0 then: wall clocks as they are)
    mono_ns: int | None = None   # this node's CLOCK_MONOTONIC in the middle of the winning round

    def to_dict(self) -> dict:
        return asdict(self)


class ClockServer:
    """Answers each 4-byte ``GSC1`` request with ``GSC1`` and its wall clock (8 bytes) until closed.

    A client opens with one byte, ``S`` (the exchange at its start) or ``E`` (at its end); the server
    counts them, so that node 0 can wait for the other nodes' end exchanges before it closes
    (:meth:`wait_for_ends`)."""

    def __init__(self, host: str = "0.0.0.0") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self._closed = threading.Event()
        self._seen = threading.Condition()
        self.starts = self.ends = 0
        threading.Thread(target=self._accept, name="gpuscope-clock", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(10)
        phase = b""
        with conn:
            try:
                phase = _recv_exact(conn, 1)
                self._count(phase, "starts")
                while not self._closed.is_set():
                    if _recv_exact(conn, len(MAGIC)) != MAGIC:
                        return
                    conn.sendall(_ANSWER.pack(MAGIC, wall_ns()))
            except OSError:
                return
            finally:
                self._count(phase, "ends")

    def _count(self, phase: bytes, what: str) -> None:
        if (phase, what) in ((b"S", "starts"), (b"E", "ends")):
            with self._seen:
                setattr(self, what, getattr(self, what) + 1)
                self._seen.notify_all()

    def wait_for_ends(self, timeout_s: float) -> bool:
        """Until every node that measured at its start has measured at its end (or ``timeout_s``)."""
        with self._seen:
            return self._seen.wait_for(lambda: self.ends >= self.starts, timeout=timeout_s)

    def publish(self, path: Path, host: str) -> None:
        """Say where this server listens, in the job folder (written whole, then renamed)."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"host": host, "port": self.port, "pid": os.getpid(), "since_ns": wall_ns()}))
        tmp.replace(path)

    def close(self) -> None:
        self._closed.set()
        try:
            self.sock.close()
        except OSError:
            pass


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def measure(host: str, port: int, rounds: int = ROUNDS, timeout_s: float = 5.0, end: bool = False) -> ClockMeasure:
    """Ask the server ``rounds`` times; the round with the shortest round trip gives the offset.
    ``end``: the exchange at the end of this node's run (the server counts those)."""
    best: tuple[int, int, int] | None = None   # (round trip, offset, monotonic time)
    with socket.create_connection((host, port), timeout=timeout_s) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(b"E" if end else b"S")
        for _ in range(rounds):
            m0, t0 = time.perf_counter_ns(), wall_ns()
            conn.sendall(MAGIC)
            magic, ts = _ANSWER.unpack(_recv_exact(conn, _ANSWER.size))
            t3, m3 = wall_ns(), time.perf_counter_ns()
            if magic != MAGIC:
                raise ConnectionError("not a gpuscope clock server")
            sample = (t3 - t0, (t0 + t3) // 2 - ts, (m0 + m3) // 2)
            if best is None or sample[0] < best[0]:
                best = sample
    assert best is not None
    return ClockMeasure(offset_ns=best[1], residual_ns=(best[0] + 1) // 2, rounds=rounds, reference=f"{host}:{port}",
                        mono_ns=best[2])


def measure_published(path: Path, fallback_host: str | None, wait_s: float = 60.0,
                      stop: threading.Event | None = None) -> ClockMeasure:
    """Wait for the reference node's ``clock-*.json`` and measure against it (its host, else ``fallback_host``).

    A file left by an earlier job with the same id names a server that is gone: keep reading it
    until one answers or ``wait_s`` passes (a shared file system may also show the new file late)."""
    deadline = time.monotonic() + wait_s
    last_error = "the reference node published no clock server"
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        try:
            where = json.loads(path.read_text())
        except (OSError, ValueError):
            where = None
        if where:
            for host in dict.fromkeys([str(where.get("host")), fallback_host]):
                if not host or host == "None":
                    continue
                try:
                    return measure(host, int(where["port"]))
                except (OSError, ValueError, KeyError, struct.error) as exc:
                    last_error = f"{host}:{where.get('port')}: {exc}"
        time.sleep(0.25)
    return ClockMeasure(offset_ns=0, residual_ns=None, rounds=0, reference=str(path), error=last_error)
