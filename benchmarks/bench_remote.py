#!/usr/bin/env python3
"""Remote hosts, measured through a real agent (docs/REMOTE.md, "Figures").

    .venv/bin/python benchmarks/bench_remote.py [--procs 64] [--seconds 8] [--rounds 3] [--ranges 1000000]

1. Live telemetry: a run of ``--procs`` processes (a parent and a fork Pool) sampled at 10 Hz is
   started through :class:`gpuscope.remote.client.RemoteCore` on an agent started here as a
   subprocess (``connect_local``: the agent's protocol over pipes, what ssh carries). Each batch's
   delay is the time from its sample (``wall_ns``, taken by the remote sampler) to its arrival in
   the window's stream (``RunStream.on_batch``); bytes per second are every byte the agent sent
   while the run was watched, counted on the workstation's side of the pipe. Goals: within
   200 ms, under 50 KB/s.
2. A report's tables: a run folder with ``--ranges`` NVTX ranges (4 processes; gpuscope's own
   event logs) opened here (``gpuscope.api.load_report``: the summary tables and the timeline
   the local window builds) and through the agent (``report_summary``: the tables summarised
   there, pulled over the pipe), alternating, cache off. Goal: remote within 2x local.

Same machine for both ends (no network: ssh's own latency and bandwidth come on top). The load
average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuscope.remote.client import RemoteCore  # noqa: E402
from gpuscope.remote.connection import Connection  # noqa: E402
from gpuscope.spec import RunSpec  # noqa: E402
from gpuscope.views.run_stream import RunStream  # noqa: E402

POOL = """
import multiprocessing as mp, sys, time
def nap(_):
    time.sleep(float(sys.argv[2]))
if __name__ == "__main__":
    mp.set_start_method("fork")
    n = int(sys.argv[1]) - 1
    with mp.Pool(n) as pool:
        r = pool.map_async(nap, range(n), chunksize=1)
        while not r.ready():
            print("alive", flush=True)
            time.sleep(0.5)
"""

RANGES = """
import sys, multiprocessing as mp
import nvtx
def work(n):
    for i in range(n):
        nvtx.push_range("step")
        nvtx.pop_range()
if __name__ == "__main__":
    n = int(sys.argv[1]) // 4
    ctx = mp.get_context("fork")
    ps = [ctx.Process(target=work, args=(n,)) for _ in range(3)]
    for p in ps: p.start()
    work(n)
    for p in ps: p.join()
"""


class CountingReader:
    """The agent's stdout as the Connection reads it, every byte counted (what the wire carries)."""

    def __init__(self, raw) -> None:
        self.raw, self.bytes, self.lock = raw, 0, threading.Lock()

    def readline(self, limit: int = -1) -> bytes:
        line = self.raw.readline(limit)
        with self.lock:
            self.bytes += len(line)
        return line

    def close(self) -> None:
        self.raw.close()


class TimedStream(RunStream):
    """A run stream that notes each batch's delay from its sample to its arrival."""

    def __init__(self) -> None:
        super().__init__()
        self.delays_ms: list[float] = []
        self.procs: list[int] = []

    def on_batch(self, batch) -> None:
        self.delays_ms.append((time.time_ns() - batch.wall_ns) / 1e6)
        self.procs.append(len(batch.processes))
        super().on_batch(batch)


def agent(env: dict[str, str], host: str | None = None) -> tuple[Connection, CountingReader]:
    """An agent here over pipes, or with ``host`` the real path: ssh, the bootstrap, the agent there."""
    if host is not None:
        from gpuscope.remote.bootstrap import open_agent
        from gpuscope.remote.hostspec import HostSpec

        remote = open_agent(HostSpec.parse(host))
        counted = CountingReader(remote.stdout)
        return Connection(remote, host=host, reader=counted), counted   # type: ignore[arg-type]
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope.remote.agent"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    reader = CountingReader(proc.stdout)
    return Connection(proc, host="bench agent", reader=reader), reader   # type: ignore[arg-type]


def telemetry_round(env: dict[str, str], script: Path, procs: int, seconds: float, host: str | None = None) -> dict:
    conn, counter = agent(env, host)
    try:
        core = RemoteCore(conn, host or "bench agent")
        stream = TimedStream()
        spec = RunSpec(script=str(script), args=(str(procs), str(seconds)), cwd=str(script.parent),
                       python=None if host else sys.executable, start_method="fork", sample_interval_s=0.1)
        run = core.start_run(spec, stream)
        t0, b0 = time.monotonic(), counter.bytes
        run.wait(seconds + 120)
        elapsed, sent = time.monotonic() - t0, counter.bytes - b0
        full = [d for d, n in zip(stream.delays_ms, stream.procs) if n >= procs]
        return {"batches": len(stream.delays_ms), "batches_all_procs": len(full),
                "max_procs": max(stream.procs, default=0),
                "delay_ms_median": statistics.median(full or [float("nan")]),
                "delay_ms_p95": sorted(full)[int(0.95 * (len(full) - 1))] if full else float("nan"),
                "delay_ms_max": max(full, default=float("nan")),
                "kb_per_s": sent / elapsed / 1000, "seconds": round(elapsed, 2),
                "status": run.record.status.value if run.record else None}
    finally:
        conn.close()


def report_rounds(env: dict[str, str], run_dir: str, rounds: int) -> list[tuple[float, float]]:
    """(local s, remote s) per round, alternating, one agent for all (as a window keeps one); the
    first round of each is the cold one (its reader's modules imported)."""
    from gpuscope import api

    conn, counter = agent(env)
    try:
        core = RemoteCore(conn, "bench agent")
        out = []
        for i in range(rounds):
            t0 = time.perf_counter()
            local = api.load_report(run_dir)
            t_local = time.perf_counter() - t0
            t0 = time.perf_counter()
            remote = core.load_report(run_dir)
            t_remote = time.perf_counter() - t0
            lc = {r.name: r.count for r in local.summaries["nvtx"]}
            rc = {r.name: r.count for r in remote.summaries["nvtx"]}
            assert lc == rc, (lc, rc)
            out.append((t_local, t_remote))
            if i == rounds - 1:
                timeline_figures(remote, counter, len(local.timeline.ranges))
            del local, remote
        return out
    finally:
        conn.close()


def timeline_figures(remote, counter: CountingReader, local_ranges: int) -> None:
    """The remote timeline's whole-run view, then one zoomed page (1/20,000 of the run, and half of
    that either side, as the window asks)."""
    b0, t0 = counter.bytes, time.perf_counter()
    tl = remote.timeline
    t_view, b_view = time.perf_counter() - t0, counter.bytes - b0
    span = (tl.duration_ns or 1) // 20_000
    mid = (tl.duration_ns or 0) // 2
    b0, t0 = counter.bytes, time.perf_counter()
    new, added = remote.remote.refine(tl, mid - span, mid + 2 * span, span // 2000)
    t_page, b_page = time.perf_counter() - t0, counter.bytes - b0
    print(f"remote timeline, whole-run view: {len(tl.ranges):,} of {local_ranges:,} ranges, {t_view:.2f} s, "
          f"{b_view / 1e3:,.0f} kB; a zoomed page (3/20,000 of the run): +{added:,} rows, {t_page:.2f} s, "
          f"{b_page / 1e3:,.0f} kB", flush=True)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranges", type=int, default=1_000_000)
    ap.add_argument("--skip-report", action="store_true")
    ap.add_argument("--skip-telemetry", action="store_true")
    ap.add_argument("--host", help="[USER@]HOST[:PORT]: the telemetry half over ssh to that host (its "
                                   "python3 runs the pool; GPUSCOPE_SSH as for gpuscope --host)")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {**os.environ, "GPUSCOPE_HOME": str(home), "GPUSCOPE_NO_CACHE": "1"}
        env.pop("PYTHONPATH", None)
        os.environ["GPUSCOPE_HOME"], os.environ["GPUSCOPE_NO_CACHE"] = str(home), "1"
        pool = Path(tmp) / "pool64.py"
        pool.write_text(POOL)
        os.chmod(tmp, 0o755)      # --host on this machine: the remote user reads the script here
        os.chmod(pool, 0o644)
        rounds = []
        for i in range(0 if args.skip_telemetry else args.rounds):
            r = telemetry_round(env, pool, args.procs, args.seconds, args.host)
            rounds.append(r)
            print(f"telemetry round {i + 1}: {json.dumps(r)}", flush=True)
        if rounds:
            med = [r["delay_ms_median"] for r in rounds]
            p95 = [r["delay_ms_p95"] for r in rounds]
            kbs = [r["kb_per_s"] for r in rounds]
            print(f"delay sample -> window stream, ms: per-round median {spread(med)}; per-round p95 {spread(p95)}")
            print(f"agent -> workstation KB/s: {spread(kbs)}")
        if not args.skip_report:
            script = Path(tmp) / "ranges.py"
            script.write_text(RANGES)
            out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--json", str(script), str(args.ranges)],
                                 env=env, capture_output=True, text=True, timeout=900, check=True).stdout
            run_dir = json.loads(out.splitlines()[-1])["run_dir"]
            times = report_rounds(env, run_dir, args.rounds + 1)
            cold, warm = times[0], times[1:]
            print(f"report tables of {args.ranges:,} ranges, cold (first open): local {cold[0]:.2f} s, "
                  f"remote {cold[1]:.2f} s, remote/local {cold[1] / cold[0]:.2f}")
            loc, rem = [t[0] for t in warm], [t[1] for t in warm]
            ratio = [r / max(lo, 1e-9) for lo, r in warm]
            print(f"report tables of {args.ranges:,} ranges, warm, s: local {spread(loc)}; remote {spread(rem)}; "
                  f"remote/local {spread(ratio)}")
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
