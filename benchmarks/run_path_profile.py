"""What one `gpuscope run` of an empty script spends its own CPU on: the dataclasses it makes (each
compiles its methods) and the modules it imports, before and after the program starts.

    python benchmarks/run_path_profile.py [--root DIR] [--runs 5]

Each run is a fresh `gpuscope run --quiet EMPTY` (the tree DIR on PYTHONPATH, a fresh data folder)
whose own process times ``dataclasses._process_class`` with ``time.thread_time`` (the CPU of the
thread that makes the class: the run's other threads do not count) and notes the modules loaded
when the program is started and at the end. Printed: per run, the dataclasses made and their CPU,
the modules before the start and after it; then the medians and the costliest classes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Runs inside the gpuscope process: wraps the dataclass maker, notes the modules at the Popen and
# at the end, writes what it saw as one JSON line to the file named by argv[1].
PROBE = r"""
import dataclasses, json, os, sys, time
out, bare, made, seen = sys.argv[1], set(sys.modules), [], {}
make = dataclasses._process_class
def timed(cls, *a, **k):
    t = time.thread_time()
    try:
        return make(cls, *a, **k)
    finally:
        made.append((time.thread_time() - t, f"{cls.__module__}.{cls.__qualname__}"))
dataclasses._process_class = timed
def hook(event, args):
    if event == "subprocess.Popen" and "start" not in seen:
        seen["start"] = sorted(set(sys.modules) - bare)
sys.addaudithook(hook)
def end(code, _exit=os._exit):
    after = sorted(set(sys.modules) - bare - set(seen.get("start", ())))
    with open(out, "w") as fh:
        json.dump({"made": made, "before": seen.get("start", []), "after": after}, fh)
    _exit(code)
os._exit = end
sys.argv = ["gpuscope", *sys.argv[2:]]
from gpuscope.cli import main
main()
"""


def one_run(root: Path, empty: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="gs-profile-") as folder:
        out = Path(folder) / "seen.json"
        env = {k: v for k, v in os.environ.items() if k != "GPUSCOPE_HOME"}
        env.update(PYTHONPATH=str(root), XDG_DATA_HOME=folder)
        subprocess.run([sys.executable, "-c", PROBE, str(out), "run", "--quiet", str(empty)], env=env, check=True,
                       cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", help="source tree whose gpuscope to run (default: this checkout)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    root = Path(args.root).resolve() if args.root else HERE.parent
    with tempfile.TemporaryDirectory(prefix="gs-profile-") as folder:
        empty = Path(folder) / "empty.py"
        empty.write_text("")
        runs = [one_run(root, empty) for _ in range(args.runs)]
    print(f"# {root}, {args.runs} runs, load average {os.getloadavg()[0]:.2f}")
    per_class: dict[str, list[float]] = {}
    for i, seen in enumerate(runs, 1):
        cpu = sum(t for t, _ in seen["made"])
        print(f"run {i}: {len(seen['made'])} dataclasses, {cpu * 1000:.1f} ms CPU; "
              f"modules before the start {len(seen['before'])}, after it {len(seen['after'])}")
        for t, name in seen["made"]:
            per_class.setdefault(name, []).append(t)
    print(f"median: {statistics.median(len(s['made']) for s in runs)} dataclasses, "
          f"{statistics.median(sum(t for t, _ in s['made']) for s in runs) * 1000:.1f} ms CPU")
    costly = sorted(per_class.items(), key=lambda kv: -statistics.median(kv[1]))
    print("costliest (median ms, runs that made it): " + ", ".join(
        f"{name} {statistics.median(ts) * 1000:.2f} ({len(ts)})" for name, ts in costly[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
