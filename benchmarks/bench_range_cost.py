"""Cost per recorded range in a child process, beside the bare nvtx.annotate cost (same run).

    python benchmarks/bench_range_cost.py [--start-method spawn|fork]

Prints the per-call times (best of repeats) and the added cost of gpuscope's recording.
Goal (issue #2): at most 1 µs added per range.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start-method", default="spawn")
    args = ap.parse_args()
    env = dict(os.environ, GPUSCOPE_HOME=tempfile.mkdtemp(prefix="gs-bench-"))
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", "--start-method", args.start_method,
                          str(HERE / "range_cost_child.py")], env=env, capture_output=True, check=True, text=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["injected"], "the child was not injected"
    added = row["gpuscope_ns"] - row["nvtx_ns"]
    print(f"start method {args.start_method}: bare call {row['bare_ns']:.0f} ns, "
          f"nvtx.annotate call {row['nvtx_ns']:.0f} ns, under gpuscope {row['gpuscope_ns']:.0f} ns "
          f"-> gpuscope adds {added:.0f} ns per range (goal <= 1000 ns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
