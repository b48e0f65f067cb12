"""Output relay throughput: a program writing MB to stdout, plain python against `gpuscope run`.

    python benchmarks/bench_output_relay.py [--mb 200] [--rounds 5]

Both sides are whole commands whose stdout is a pipe that this script drains (as when a user pipes
the output on); stderr is discarded. `gpuscope run` also saves the output in the run folder (capped:
GPUSCOPE_OUTPUT_CAP_MB, default 64 MB per stream). Rounds alternate; the median of each side, the
spread (min-max), the whole command's speed as a share of plain's, and the relay throughput: each
side's time minus the same command writing nothing (gpuscope's fixed start-up is measured by
benchmarks/bench_startup.py, not here), as a share of plain (goal, issue 15.8: >= 80 %).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = """
import sys
line = b"%s\\n" % (b"o" * 99)
block = line * 10486          # ~1 MB of 100-byte lines
out = sys.stdout.buffer
for _ in range(int(sys.argv[1])):
    out.write(block)
out.flush()
"""


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    total = 0
    while chunk := os.read(proc.stdout.fileno(), 1 << 20):
        total += len(chunk)
    proc.wait()
    return time.perf_counter() - t0, total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gs-relay-")
    env = dict(os.environ, GPUSCOPE_HOME=str(Path(tmp) / "home"))
    writer = Path(tmp) / "writer.py"
    writer.write_text(WRITER)
    plain = [sys.executable, str(writer), str(args.mb)]
    under = [sys.executable, "-m", "gpuscope", "run", "--quiet", str(writer), str(args.mb)]
    timed(plain, env, tmp), timed(under, env, tmp)  # warm caches
    empty = {"plain": [sys.executable, str(writer), "0"],
             "under": [sys.executable, "-m", "gpuscope", "run", "--quiet", str(writer), "0"]}
    times: dict[str, list[float]] = {"plain": [], "under": [], "plain0": [], "under0": []}
    for i in range(args.rounds):
        order = (("plain", plain), ("under", under)) if i % 2 == 0 else (("under", under), ("plain", plain))
        for key, argv in order:
            seconds, total = timed(argv, env, tmp)
            assert total >= args.mb * 1_048_600, total
            times[key].append(seconds)
            times[key + "0"].append(timed(empty[key], env, tmp)[0])   # the same command, writing nothing
    med = {k: statistics.median(v) for k, v in times.items()}

    def span(key: str) -> str:
        return f"median {med[key]:.3f} s (min {min(times[key]):.3f}, max {max(times[key]):.3f})"

    relay = (med["plain"] - med["plain0"]) / max(med["under"] - med["under0"], 1e-9)
    print(f"{args.mb} MB to stdout, {args.rounds} alternated rounds: python {span('plain')}; "
          f"gpuscope run {span('under')}; whole command under gpuscope {med['plain'] / med['under'] * 100:.0f} % "
          f"of plain's speed")
    print(f"  start-up, the same commands writing nothing: python {span('plain0')}; gpuscope run {span('under0')}")
    print(f"  relay throughput (each side's start-up subtracted) {relay * 100:.0f} % of plain (goal >= 80 %); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
