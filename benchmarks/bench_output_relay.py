"""Output relay throughput: a program writing MB to stdout, plain python against `gpuscope run`.

    python benchmarks/bench_output_relay.py [--mb 200] [--rounds 5]

Both sides are whole commands whose stdout is a pipe that this script drains (as when a user pipes
the output on); stderr is discarded. `gpuscope run` also saves the output in the run folder (capped:
GPUSCOPE_OUTPUT_CAP_MB, default 64 MB per stream). Rounds alternate; the median of each side, the
spread (min-max), and throughput as a share of plain (goal, issue 15.8: >= 80 %).
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
    while chunk := proc.stdout.read1(1 << 20):
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
    a: list[float] = []
    b: list[float] = []
    for i in range(args.rounds):
        for argv in ((plain, under) if i % 2 == 0 else (under, plain)):
            seconds, total = timed(argv, env, tmp)
            assert total >= args.mb * 1_048_600, total
            (a if argv is plain else b).append(seconds)
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{args.mb} MB to stdout: python median {ma:.3f} s (min {min(a):.3f}, max {max(a):.3f}); "
          f"gpuscope run median {mb:.3f} s (min {min(b):.3f}, max {max(b):.3f}); "
          f"throughput under gpuscope {ma / mb * 100:.0f} % of plain (goal >= 80 %), {args.rounds} alternated rounds; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
