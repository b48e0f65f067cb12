"""GPU smoke test of gpuscope's telemetry, for a machine with an NVIDIA GPU (under 3 minutes).

    python scripts/gpu_smoke.py [--python PYTHON_WITH_CUDA_TORCH] [--seconds 8]

Starts a small torch CUDA job (matmuls on ~1 GiB) under ``gpuscope run --json`` and checks:

1. live (a RunSampler on the ``gpuscope run`` process): device utilization > 0 and the job's
   per-process GPU memory appear while it runs, and both are gone once it has ended;
2. the run store: the run's series holds the job's GPU memory and the device's utilization;
3. the run summary (``--json``): the job's peak_gpu_mem_bytes > 0;
4. the event log: torch allocator memory (``torch_mem`` I lines) reported, reserved <= driver memory;
5. findings: a job that initialises CUDA, then starts a fork pool whose worker uses CUDA, gets the
   ``cuda-after-fork`` error naming the line that initialised CUDA (the real-GPU counterpart of
   the test double in tests/findings/test_pickle_torch_rules.py).

Prints one PASS/FAIL line per check and exits 0 only if all pass. Nothing is left running.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOB = """
import os, sys, time, torch
print("job pid", os.getpid(), flush=True)
x = torch.randn(8192, 8192, device="cuda")            # 256 MiB; a few more for the products
end = time.time() + float(sys.argv[1])
while time.time() < end:
    y = x @ x
    torch.cuda.synchronize()
print("job done", float(y[0, 0]), flush=True)
"""

FORK_JOB = """
import multiprocessing as mp, torch
def child(_):
    return float(torch.ones(1, device="cuda").sum())
if __name__ == "__main__":
    x = torch.ones(1, device="cuda")
    try:
        with mp.get_context("fork").Pool(1) as pool:
            print(pool.map(child, [0]))
    except Exception as exc:
        print("child failed:", type(exc).__name__, exc)
"""

results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str) -> None:
    results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def preflight(python: str) -> None:
    from gpuscope.telemetry.gpu import open_backend

    gpu = open_backend()
    if not gpu.available:
        sys.exit(f"gpu_smoke: {gpu.reason}")
    print(f"gpu_smoke: {gpu.reason}; {[d.name for d in gpu.devices()]}", flush=True)
    gpu.close()
    probe = subprocess.run([python, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"],
                           capture_output=True, timeout=120)
    if probe.returncode != 0:
        sys.exit(f"gpu_smoke: {python} has no CUDA torch (pass --python with one)")


def live_checks(batches: list, job_pid: int | None, job_end_ns: int | None) -> None:
    def job_mem(b) -> int:
        return sum(p.gpu_mem or 0 for p in b.processes if p.pid == job_pid)

    during = [b for b in batches if job_end_ns is None or b.t_ns < job_end_ns]
    after = [b for b in batches if job_end_ns is not None and b.t_ns > job_end_ns + 1.5e9]
    util = max((d.util_gpu or 0 for b in during for d in b.devices), default=0)
    mem = max((job_mem(b) for b in during), default=0)
    check("live device utilization appears", util > 0, f"max util {util:.0f} %")
    check("live per-process GPU memory appears", mem > 0, f"job pid {job_pid}: max {mem >> 20} MiB")
    gone = bool(after) and all(job_mem(b) == 0 and all(g.pid != job_pid for g in b.gpu_processes) for b in after)
    check("job's GPU memory disappears after it ends", gone, f"{len(after)} samples after the end")
    idle = [d.util_gpu for b in after[-3:] for d in b.devices if d.util_gpu is not None]
    check("device utilization falls after the end", bool(idle) and min(idle) < util,
          f"last utilization {idle[-1:]} %")


def store_checks(home: Path, summary: dict, job_pid: int | None) -> None:
    os.environ["GPUSCOPE_HOME"] = str(home)
    from gpuscope.store import db
    from gpuscope.telemetry.series import load_series
    from gpuscope.telemetry.torch_memory import read_torch_mem

    ser = load_series(db.connect(), summary["run_id"])
    if ser is None:
        check("store has the run's samples", False, "no series")
        return
    def top(values) -> float:
        values = [float(v) for v in values if v == v]   # NaN = not available
        return max(values, default=0.0)

    proc = ser["processes"].get(job_pid, {})
    stored = top(proc.get("gpu_mem", []))
    utils = [top(g["util_gpu"]) for g in ser["gpus"].values()]
    check("store: job GPU memory and device utilization", stored > 0 and max(utils or [0]) > 0,
          f"{int(stored) >> 20} MiB, util max {max(utils or [0]):.0f} %")
    rows = [p for p in summary.get("processes", []) if p.get("pid") == job_pid]
    peak = (rows[0].get("peak_gpu_mem_bytes") or 0) if rows else 0
    check("run --json: peak_gpu_mem_bytes", peak > 0, f"{peak >> 20} MiB")
    torch_mem = read_torch_mem(summary["run_dir"]).get(job_pid, {})
    reserved = max((top(d["reserved"]) for d in torch_mem.values()), default=0.0)
    check("torch allocator memory reported", reserved > 0 and reserved <= max(stored, peak) + (64 << 20),
          f"reserved max {int(reserved) >> 20} MiB vs driver {max(int(stored), peak) >> 20} MiB")


def findings_checks(tmp: str, python: str) -> None:
    """A fork after CUDA was initialised: the finding names the job's line 6 (``x = torch.ones``)."""
    from gpuscope.findings.engine import analyse_run

    job = Path(tmp, "fork_job.py")
    job.write_text(FORK_JOB)
    env = {**os.environ, "GPUSCOPE_HOME": str(Path(tmp, "home"))}
    proc = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--json", "--quiet", "--python", python,
                           str(job)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=150)
    try:
        run_dir = json.loads(proc.stdout.strip().splitlines()[-1])["run_dir"]
    except (IndexError, ValueError, KeyError):
        check("findings: cuda-after-fork", False, "no JSON summary")
        return
    found = [f for f in analyse_run(Path(run_dir)) if f.code == "cuda-after-fork" and f.pids]
    site = f"{job}:6 in <module>"
    check("findings: cuda-after-fork names the call", bool(found) and site in found[0].title,
          found[0].title if found else "no cuda-after-fork finding with a process")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter with CUDA torch for the job")
    ap.add_argument("--seconds", type=float, default=8.0, help="how long the job computes")
    args = ap.parse_args()
    preflight(args.python)
    from gpuscope.telemetry.sampler import RunSampler

    with tempfile.TemporaryDirectory(prefix="gpuscope-smoke-") as tmp:
        home, job = Path(tmp, "home"), Path(tmp, "job.py")
        job.write_text(JOB)
        env = {**os.environ, "GPUSCOPE_HOME": str(home)}
        cli = subprocess.Popen([sys.executable, "-m", "gpuscope", "run", "--json", "--quiet", "--interval", "0.1",
                                "--python", args.python, str(job), str(args.seconds)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        sampler = RunSampler(cli.pid, 0.1)
        batches: list = []
        sampler.add_listener(batches.append)
        sampler.start()
        job_pid = job_end = None
        try:
            assert cli.stdout is not None
            out_lines = []
            for line in cli.stdout:
                out_lines.append(line)
                if line.startswith("job pid"):
                    job_pid = int(line.split()[2])
                if line.startswith("job done"):
                    job_end = time.monotonic_ns()
            cli.wait(timeout=150)
            time.sleep(3.0)                       # samples after the end (CUDA teardown included)
        finally:
            sampler.stop()
            if cli.poll() is None:
                cli.kill()
                cli.wait()
        live_checks(batches, job_pid, job_end)
        try:
            summary = json.loads(out_lines[-1])
        except (IndexError, ValueError):
            check("run --json summary", False, "no JSON on the last line")
        else:
            store_checks(home, summary, job_pid)
        findings_checks(tmp, args.python)
    failed = [name for name, ok, _ in results if not ok]
    print(f"gpu_smoke: {len(results) - len(failed)}/{len(results)} checks passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
