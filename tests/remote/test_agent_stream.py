"""The live stream's cost, measured over ``connect_local``: a 64-process pool at 10 Hz sampling.

Prints bytes per second on the wire and the delay from a sample's time to its arrival at the
connection (docs/REMOTE.md keeps the figures; run with ``-s`` to see them).
"""

from __future__ import annotations

import statistics
import textwrap
import time

import pytest

from gpuscope.remote import protocol
from gpuscope.remote.batchcodec import BatchReader
from gpuscope.remote.connection import connect_local
from gpuscope.spec import RunSpec
from gpuscope.telemetry.batch import SampleBatch

pytestmark = pytest.mark.timeout(300)

POOL = 64
SECONDS = 8


def pool_script(tmp_path):
    path = tmp_path / "pool.py"
    path.write_text(textwrap.dedent(f"""
        import multiprocessing as mp, time
        def work(i):
            end = time.time() + {SECONDS}
            while time.time() < end:
                sum(range(2000))
                time.sleep(0.05)
            return i
        if __name__ == "__main__":
            with mp.Pool({POOL}) as pool:
                print(sum(pool.map(work, range({POOL}))), flush=True)
    """))
    return RunSpec(script=str(path), cwd=str(tmp_path), sample_interval_s=0.1).to_dict()


def test_live_stream_of_a_64_process_pool(tmp_path):
    conn = connect_local()
    try:
        started = conn.request("start_run", {"spec": pool_script(tmp_path)}, timeout=120)
        wire: dict[str, int] = {}
        reader = BatchReader()
        delays: list[float] = []
        procs: list[int] = []
        first: list[float] = []

        def on_event(kind, data):
            now = time.monotonic_ns()
            size = len(protocol.encode(protocol.event(1, kind, data)))
            wire[kind] = wire.get(kind, 0) + size
            if kind == "batch":
                plain = reader.expand(data)
                wire["plain batch"] = wire.get("plain batch", 0) + len(protocol.encode(protocol.event(1, kind, plain)))
                assert SampleBatch.from_dict(plain).to_dict() == plain
                first.append(now)
                delays.append((now - data["t_ns"]) / 1e6)
                procs.append(len(data["processes"]))
        conn.request("watch_run", {"run_id": started["run_id"], "compact": True}, on_event=on_event, timeout=240)
    finally:
        conn.close()
    full = [i for i, n in enumerate(procs) if n > POOL]       # ticks that saw the whole pool
    assert full, f"the sampler never saw the pool: {max(procs, default=0)} processes"
    span_s = (first[-1] - first[0]) / 1e9
    live = sum(n for kind, n in wire.items() if kind not in ("ended", "plain batch")) / span_s   # ended: once
    plain_live = live + (wire["plain batch"] - wire["batch"]) / span_s
    delays_sorted = sorted(delays)
    median = statistics.median(delays_sorted)
    p95 = delays_sorted[int(0.95 * (len(delays_sorted) - 1))]
    print(f"\nlive stream of a {POOL}-process pool at 10 Hz over connect_local: {len(delays)} batches in "
          f"{span_s:.1f} s ({len(full)} with the whole pool, up to {max(procs)} processes), "
          f"{live / 1000:.1f} kB/s live ({wire['batch'] / span_s / 1000:.1f} kB/s of batches; "
          f"{plain_live / 1000:.1f} kB/s without compact), "
          f"{wire['ended'] / 1000:.0f} kB for the ended record; "
          f"sample-to-arrival delay median {median:.0f} ms, p95 {p95:.0f} ms, max {delays_sorted[-1]:.0f} ms")
    assert live < 50_000, f"{live / 1000:.1f} kB/s"
    assert p95 < 1000, f"p95 {p95:.0f} ms"   # the goal (200 ms) is checked on a quiet machine: docs/REMOTE.md
