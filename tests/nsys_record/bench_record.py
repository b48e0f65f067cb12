"""Time the recording pipeline per provisioned nsys: profile, import, export (median of N runs).

    .venv/bin/python -m tests.nsys_record.bench_record [--runs 5] [--trace nvtx,osrt,cuda] [--versions 2022.4]

Each run records tests.nsys_record.helpers.NVTX_SCRIPT through prepare() / finish(), as the run
engine does; hung runs (killed after 60 s) and runs where nsys recorded nothing are counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gpuscope.nsys import locate, record
from tests.nsys_record.helpers import NVTX_SCRIPT, make_spec, nsys_machine_lock


def one(inst: locate.NsysInstall, tmp: Path, trace: tuple[str, ...]) -> dict:
    script = tmp / "script.py"
    script.write_text(NVTX_SCRIPT)
    spec = make_spec(script, trace=trace)
    session = record.prepare(spec, tmp, [spec.python, spec.script], dict(os.environ), install=inst)
    t0 = time.monotonic()
    with open(tmp / "out.log", "wb") as out:
        proc = subprocess.Popen(session.argv, env=session.env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        session.started(proc.pid)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            session.kill(grace_s=0.5)
            proc.wait()
            return {"hung": True}
    res = session.finish(timeout_s=60)
    steps = dict(res.steps)
    steps["total"] = time.monotonic() - t0
    steps["empty"] = any(f.code == "nothing-recorded" for f in res.findings)
    steps["ok"] = res.ok
    return steps


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--trace", default="nvtx,osrt,cuda")
    p.add_argument("--versions", default="", help="releases to time, e.g. 2022.4 (default: all provisioned)")
    args = p.parse_args()
    trace = tuple(t for t in args.trace.split(",") if t)
    print(f"trace={','.join(trace)}, {args.runs} runs per version, median seconds")
    print(f"{'nsys':<12} {'profile':>8} {'import':>7} {'export':>7} {'total':>7}  hung  empty")
    for d in reversed(locate.provisioned_dirs()):
        if args.versions and d.name not in args.versions.split(","):
            continue
        inst = locate.install_at(d / locate.DEBIAN_TARGET / "nsys", "cache")
        runs = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="gs-bench-rec-") as tmp, nsys_machine_lock():
                runs.append(one(inst, Path(tmp), trace))
        good = [r for r in runs if not r.get("hung") and r.get("ok")]
        med = {k: statistics.median(r[k] for r in good) if good else float("nan")
               for k in ("profile", "import", "export", "total")}
        hung = sum(1 for r in runs if r.get("hung"))
        empty = sum(1 for r in runs if r.get("empty"))
        print(f"{inst.version:<12} {med['profile']:>8.2f} {med['import']:>7.2f} {med['export']:>7.2f} "
              f"{med['total']:>7.2f}  {hung:>4}  {empty:>5}")


if __name__ == "__main__":
    main()
