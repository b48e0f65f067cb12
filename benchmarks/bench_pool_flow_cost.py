"""Cost of the pool-flow records (J per submitted job, T per task taken by a worker).

    .venv/bin/python benchmarks/bench_pool_flow_cost.py

Runs benchmarks/pool_flow_cost_child.py under `gpuscope run` (so the injection is the real one,
writing to a real event log) and prints, per record, the median of 15 alternated rounds with the
spread (min–max), beside the path it is added to, and the machine's load average.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    env = dict(os.environ, GPUSCOPE_HOME=tempfile.mkdtemp(prefix="gs-bench-"))
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", str(HERE / "pool_flow_cost_child.py")],
                         env=env, capture_output=True, check=True, text=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["injected"], "the child was not injected"
    med = {k: statistics.median(v) for k, v in row.items() if k != "injected"}
    spread = {k: (min(v), max(v)) for k, v in row.items() if k != "injected"}
    t_added = med["task_with_T_ns"] - med["task_without_T_ns"]
    j_added = med["job_with_J_ns"] - med["job_without_J_ns"]
    for k in med:
        print(f"{k:20s} median {med[k]:8.1f} ns  (min {spread[k][0]:.1f} – max {spread[k][1]:.1f})")
    print(f"T line: +{t_added:.0f} ns per task ({t_added / med['task_without_T_ns'] * 100:+.1f} % of gpuscope's "
          f"per-task path of {med['task_without_T_ns']:.0f} ns)")
    share = j_added / med['job_without_J_ns'] * 100
    print(f"J line: +{j_added:.0f} ns per job ({share:+.1f} % of ApplyResult.__init__, "
          f"{j_added / med['apply_async_roundtrip_ns'] * 100:.2f} % of a one-task job's round trip through a Pool(1) "
          f"of {med['apply_async_roundtrip_ns'] / 1000:.0f} µs)")
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
