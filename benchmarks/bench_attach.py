"""Cost of ``gpuscope attach`` on a 64-process tree, and how long a stack read pauses a process.

- first picture: ``AttachSession.start()`` on a fresh session (tree, roles from the outside, the
  sampler's first tick) of a fork pool of 63 workers plus its parent (64 Python processes, plus
  the resource tracker when there is one);
- stacks: ``take_stacks()`` of those 64 processes (py-spy, 8 at a time), non-blocking and blocking;
- follow loop: the attaching process's CPU (``time.process_time``) while it follows the idle
  tree for ``--follow`` seconds at the sampler's interval, as a share of one core, once the role
  probe has read each child (its py-spy processes are not counted: they are children);
- pause: a process that spins in a loop records every gap between iterations; py-spy reads it
  20 times blocking and 20 times with ``--nonblocking``; the longest gap inside each read's window
  against the longest gap in windows of the same length without a read.

    python benchmarks/bench_attach.py [--rounds 5] [--follow 10]

Figures are medians over the rounds (min-max); the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuscope.attach.session import AttachSession  # noqa: E402
from gpuscope.attach.stacks import reader_tool  # noqa: E402

POOL = """
import multiprocessing as mp, time
def task(x):
    return x
if __name__ == "__main__":
    mp.set_start_method("fork")
    with mp.Pool(63) as pool:
        pool.map(task, range(63))
        print("ready", flush=True)
        time.sleep(3600)
"""

SPINNER = """
import json, sys, time
gaps, last, end = [], time.perf_counter(), time.perf_counter() + float(sys.argv[1])
print("ready", flush=True)
while last < end:
    now = time.perf_counter()
    if now - last > 2e-4:
        gaps.append((last, now - last))
    last = now
print(json.dumps(gaps), flush=True)
"""


def _spread(xs: list[float], unit: float = 1e3) -> str:
    return f"{statistics.median(xs) * unit:.1f} ms ({min(xs) * unit:.1f}-{max(xs) * unit:.1f})"


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    folder = tempfile.mkdtemp(prefix="bench-attach-")
    path = os.path.join(folder, "job.py")
    Path(path).write_text(code)
    proc = subprocess.Popen([sys.executable, path, *args], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


def _settle(s: AttachSession) -> None:
    """Wait until the role probe has read each fork child (its py-spy reads are a one-off)."""
    deadline = time.monotonic() + 20
    while any(p.role == "fork child" for p in s.view().processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)


def tree_figures(rounds: int, follow_s: float) -> dict[str, str]:
    job = _start(POOL)
    out: dict[str, str] = {}
    try:
        first: list[float] = []
        nonblocking: list[float] = []
        blocking: list[float] = []
        counts: set[int] = set()
        for _ in range(rounds):
            t0 = time.perf_counter()
            s = AttachSession(job.pid, 0.5, record=False)
            view = s.start()
            first.append(time.perf_counter() - t0)
            counts.add(len(view.processes))
            _settle(s)
            order = ((True, nonblocking), (False, blocking))
            for how, into in order if len(first) % 2 else order[::-1]:
                s.nonblocking = how
                t0 = time.perf_counter()
                got = s.take_stacks()
                into.append(time.perf_counter() - t0)
                assert sum(1 for p in got.processes if p.threads) >= 64, [p.note for p in got.processes]
            s.detach()
        out["processes"] = ", ".join(map(str, sorted(counts)))
        out["first picture (start)"] = _spread(first)
        out["stacks, non-blocking"] = _spread(nonblocking)
        out["stacks, blocking"] = _spread(blocking)
        for interval in (0.1, 0.5, 1.0):
            s = AttachSession(job.pid, interval, record=False)
            s.start()
            _settle(s)                            # the steady state: after the role probe's reads
            c0, w0 = time.process_time(), time.perf_counter()
            time.sleep(follow_s)
            share = (time.process_time() - c0) / (time.perf_counter() - w0)
            s.detach()
            out[f"follow loop at {interval} s"] = f"{share * 100:.2f} % of a core"
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    return out


def pause_figures(reads: int = 20) -> dict[str, str]:
    tool = reader_tool()
    assert tool is not None and tool[0] == "py-spy", "needs py-spy"
    seconds = 4 + reads * 2 * 0.6
    job = _start(SPINNER, str(seconds))
    windows: dict[str, list[tuple[float, float]]] = {"none": [], "blocking": [], "nonblocking": []}
    time.sleep(1.0)
    for how in ("blocking", "nonblocking"):
        for _ in range(reads):
            t0 = time.perf_counter()
            subprocess.run([tool[1], "dump", "--pid", str(job.pid), "--json",
                            *(["--nonblocking"] if how == "nonblocking" else [])], capture_output=True)
            t1 = time.perf_counter()
            windows[how].append((t0, t1))
            windows["none"].append((t1 + 0.1, t1 + 0.1 + (t1 - t0)))     # a window as long, without a read
            time.sleep(0.2 + (t1 - t0))     # the window without a read ends before the next read
    assert job.stdout is not None
    gaps = json.loads(job.stdout.readline())
    job.wait()

    def longest(w: tuple[float, float]) -> float:
        return max((g for t, g in gaps if w[0] <= t + g and t <= w[1]), default=0.0)

    return {f"longest stall in a {how} read window": _spread([longest(w) for w in ws])
            for how, ws in windows.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--follow", type=float, default=10.0)
    args = ap.parse_args()
    print("load before:", os.getloadavg())
    figures = {**tree_figures(args.rounds, args.follow), **pause_figures()}
    print("load after:", os.getloadavg())
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
