"""GPU smoke test of gpuscope, for a machine with an NVIDIA GPU: one prepared call, under 10 minutes.

    python scripts/gpu_smoke.py [--python PYTHON_WITH_CUDA_TORCH] [--seconds 8] [--out FIGURES.json]
                                [--quick] [--skip-sharing | --sharing-only]

Telemetry and findings (a small torch CUDA job, matmuls on ~1 GiB, under ``gpuscope run --json``):

1. live (a RunSampler on the ``gpuscope run`` process): device utilization > 0 and the job's
   per-process GPU memory appear while it runs, and both are gone once it has ended;
2. the run store: the run's series holds the job's GPU memory and the device's utilization;
3. the run summary (``--json``): the job's peak_gpu_mem_bytes > 0;
4. findings: a job that initialises CUDA, then starts a fork pool whose worker uses CUDA, gets the
   ``cuda-after-fork`` error naming the line that initialised CUDA (the real-GPU counterpart of
   the test double in tests/findings/test_pickle_torch_rules.py).

The sharing experiment (docs/GPU-SHARING.md): processes that each launch kernels of a known
length (``torch.cuda._sleep``, calibrated once in a process of its own) on one GPU, recorded with
``gpuscope run --nsys`` (cuda trace), MPS off:

- 2 and 4 processes (``--quick``: 2), started by fork and by spawn;
- ``own``: each process launches its kernels back to back; ``queue``: the processes take work
  items from one shared multiprocessing queue (one kernel and a synchronize per item);
- ``one``: the 2-process cases' total work from one process on one stream, the reference.

Cases run most telling first (2 processes, the reference, 4 processes, the queue); one that could
not end within ``--budget`` (default 540 s for the whole call) is not started and fails.

Checked against the kernels' known length, on the run's ``gpu_sharing`` (``gpuscope report
--json``): the recorded kernels last the calibrated length, the cuda trace reaches the report's
timeline with the workers' pids, each process's GPU time and the device's busy time add up to
the work launched, processes of one GPU without MPS never run at once (concurrent time ~0),
they switch, own-mode workers wait behind each other (queued time > 0), ``gpu-time-sliced`` is
found for them and not for ``one``.

Prints one PASS/FAIL line per check and exits 0 only if all pass; ``--out`` writes every figure
as JSON (for docs/GPU-SHARING.md). Nothing is left running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    conn: Any = db.connect()      # a StoreConnection: the sqlite3 calls load_series makes
    ser = load_series(conn, summary["run_id"])
    conn.close()
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


def findings_checks(tmp: str, python: str) -> None:
    """A fork after CUDA was initialised: the finding names the job's line 6 (``x = torch.ones``)."""
    from gpuscope.findings.engine import analyse_run

    job = Path(tmp, "fork_job.py")
    job.write_text(FORK_JOB)
    env = {**os.environ, "GPUSCOPE_HOME": str(Path(tmp, "home"))}
    out, _ = gpuscope_run([sys.executable, "-m", "gpuscope", "run", "--json", "--quiet", "--python", python,
                           str(job)], env, 150)
    try:
        run_dir = json.loads(out.strip().splitlines()[-1])["run_dir"]
    except (IndexError, ValueError, KeyError):
        check("findings: cuda-after-fork", False, "no JSON summary")
        return
    found = [f for f in analyse_run(Path(run_dir)) if f.code == "cuda-after-fork" and f.pids]
    site = f"{job}:6 in <module>"
    check("findings: cuda-after-fork names the call", bool(found) and site in found[0].title,
          found[0].title if found else "no cuda-after-fork finding with a process")


# --------------------------------------------------------------------------- the sharing experiment

CALIBRATE = """
import json, torch
torch.cuda.init()
torch.cuda._sleep(1_000_000)
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
best = None
for _ in range(5):
    s.record(); torch.cuda._sleep(50_000_000); e.record(); torch.cuda.synchronize()
    ms = s.elapsed_time(e)
    best = ms if best is None else min(best, ms)
print(json.dumps({"cycles_per_ms": 50_000_000 / best, "name": torch.cuda.get_device_name(0)}))
"""

SHARE_JOB = """
import json, multiprocessing as mp, os, sys

def worker(cycles, kernels, mode, barrier, queue, done):
    import torch
    torch.zeros(1, device="cuda")                 # CUDA up before the common start
    torch.cuda.synchronize()
    barrier.wait()
    if mode == "queue":
        while queue.get() is not None:
            torch.cuda._sleep(cycles)
            torch.cuda.synchronize()
    else:
        for _ in range(kernels):
            torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
    done.put(os.getpid())

if __name__ == "__main__":
    method, mode = sys.argv[1], sys.argv[5]
    nproc, kernels, cycles = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    ctx = mp.get_context(method)
    barrier, queue, done = ctx.Barrier(nproc), ctx.Queue(), ctx.Queue()
    per = kernels if mode != "queue" else 0
    procs = [ctx.Process(target=worker, args=(cycles, per, mode, barrier, queue, done)) for _ in range(nproc)]
    for p in procs:
        p.start()
    if mode == "queue":
        for _ in range(kernels * nproc):
            queue.put(1)
        for _ in range(nproc):
            queue.put(None)
    pids = [done.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    print("workers " + json.dumps(sorted(pids)), flush=True)
"""

ONE_JOB = """
import json, os, sys, torch
kernels, cycles = int(sys.argv[1]), int(sys.argv[2])
torch.zeros(1, device="cuda")
for _ in range(kernels):
    torch.cuda._sleep(cycles)
torch.cuda.synchronize()
print("workers " + json.dumps([os.getpid()]), flush=True)
"""

CASE_TIMEOUT_S = 150      # one recorded case (nsys start, CUDA start of each worker, export)
TOLERANCE = 0.25          # recorded kernel lengths and GPU times within 25 % of what was launched
CONCURRENT_MAX = 0.05     # without MPS, processes on one GPU should (almost) never run at once


@dataclass
class Case:
    """One run of the experiment: how many processes, how started, how they get their work."""

    nproc: int
    method: str               # fork | spawn ("one": the reference process)
    mode: str                 # own | queue | one

    @property
    def name(self) -> str:
        return "one process" if self.mode == "one" else f"{self.nproc} x {self.method} {self.mode}"


def cases(quick: bool) -> list[Case]:
    """The most telling first (a spent --budget drops the last): 2 processes, the reference, then
    4 processes, then the shared queue."""
    first = [Case(2, "spawn", "own"), Case(2, "fork", "own"), Case(2, "-", "one")]
    if quick:
        return first
    return first + [Case(4, m, "own") for m in ("spawn", "fork")] + [Case(n, m, "queue") for n in (2, 4)
                                                                      for m in ("spawn", "fork")]


def calibrate(python: str) -> float:
    """Cycles of ``torch.cuda._sleep`` per ms on this GPU, measured alone in a process of its own."""
    out = subprocess.run([python, "-c", CALIBRATE], capture_output=True, text=True, timeout=180)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"gpu_smoke: torch.cuda._sleep runs {data['cycles_per_ms']:,.0f} cycles per ms on {data['name']}",
          flush=True)
    return float(data["cycles_per_ms"])


def run_case(tmp: str, python: str, case: Case, kernels: int, cycles: int) -> tuple[str | None, list[int]]:
    """Record one case with ``gpuscope run --nsys``: (run folder, worker pids)."""
    script = Path(tmp, f"share_{case.mode}.py")
    script.write_text(ONE_JOB if case.mode == "one" else SHARE_JOB)
    job = ([str(kernels * case.nproc), str(cycles)] if case.mode == "one"
           else [case.method, str(case.nproc), str(kernels), str(cycles), case.mode])
    env = {**os.environ, "GPUSCOPE_HOME": str(Path(tmp, "home"))}
    fork = ["--nsys-fork", "on"] if case.method == "fork" else []      # children that never exec
    out, err = gpuscope_run([sys.executable, "-m", "gpuscope", "run", "--json", "--nsys", *fork, "--python", python,
                             str(script), *job], env, CASE_TIMEOUT_S)
    lines = out.strip().splitlines()
    pids: list[int] = next((json.loads(ln.split(" ", 1)[1]) for ln in lines if ln.startswith("workers ")), [])
    try:
        return json.loads(lines[-1])["run_dir"], pids
    except (IndexError, ValueError, KeyError):
        print(out[-2000:], err[-2000:], flush=True)
        return None, pids


def gpuscope_run(cmd: list[str], env: dict, timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of a ``gpuscope run``; past ``timeout`` it gets Ctrl-C (it stops its whole
    process tree and nsys), then a kill: a hung case costs its limit, never the rest of the call."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return out, err + f"\ngpu_smoke: stopped after {timeout:.0f} s"


def sharing_checks(case: Case, report, pids: list[int], kernels: int, kernel_ms: float,
                   findings: list) -> dict:
    """Check one recorded case against the kernels' known length; returns its figures."""
    import numpy as np

    from gpuscope.gpu import sharing_report

    tl = report.timeline
    mine = np.isin(tl.kernels.pid, pids)
    lengths_ms = (tl.kernels.end_ns[mine] - tl.kernels.start_ns[mine]) / 1e6
    long = lengths_ms[lengths_ms > kernel_ms / 2]           # the sleep kernels, not CUDA's own small ones
    check(f"{case.name}: cuda trace in the report timeline", bool(mine.any()) and len(long) >= kernels,
          f"{int(mine.sum())} kernels of pids {pids}, {len(long)} of them the sleep kernels")
    median = float(np.median(long)) if len(long) else 0.0
    check(f"{case.name}: recorded kernel length", abs(median - kernel_ms) <= TOLERANCE * kernel_ms,
          f"median {median:.3f} ms, launched {kernel_ms:.3f} ms")
    rows = sharing_report.report_json(report)
    dev = max(rows, key=lambda d: d["busy_s"]) if rows else None
    work_s = kernels * case.nproc * kernel_ms / 1e3
    figures = {"case": case.name, "kernels": int(len(long)), "kernel_ms_median": median, "work_s": work_s,
               "gpu_sharing": dev}
    if dev is None:
        check(f"{case.name}: gpu_sharing", False, "no GPU work in the report")
        return figures
    busy, conc = dev["busy_s"], dev["concurrent_s"]
    check(f"{case.name}: busy time = the work launched", abs(busy - work_s) <= TOLERANCE * work_s,
          f"busy {busy * 1e3:.1f} ms, launched {work_s * 1e3:.1f} ms")
    procs = {p["pid"]: p for p in dev["processes"]}
    gpu = [procs.get(p, {}).get("gpu_s") or 0.0 for p in pids]
    check(f"{case.name}: processes' GPU time adds up", abs(sum(gpu) - conc - busy) <= TOLERANCE * busy,
          f"sum {sum(gpu) * 1e3:.1f} ms (per process {[round(g * 1e3, 1) for g in gpu]}), busy {busy * 1e3:.1f} ms")
    if case.mode == "one":
        check("one process: no switch, nothing concurrent", dev["switches"] == 0 and conc == 0,
              f"switches {dev['switches']}, concurrent {conc * 1e3:.3f} ms")
        check("one process: no gpu-time-sliced", not any(f.code == "gpu-time-sliced" for f in findings), "")
        return figures
    if case.mode == "own":
        each = kernels * kernel_ms / 1e3
        check(f"{case.name}: each process's GPU time = its kernels",
              all(abs(g - each) <= TOLERANCE * each for g in gpu),
              f"{[round(g * 1e3, 1) for g in gpu]} ms, launched {each * 1e3:.1f} ms each")
        queued = [procs.get(p, {}).get("queued_s") for p in pids]
        check(f"{case.name}: workers queued behind each other", any((q or 0) > 0 for q in queued),
              f"queued {[None if q is None else round(q * 1e3, 1) for q in queued]} ms")
    check(f"{case.name}: without MPS the processes never ran at once", conc <= CONCURRENT_MAX * busy,
          f"concurrent {conc * 1e3:.3f} ms of busy {busy * 1e3:.1f} ms")
    check(f"{case.name}: the GPU switched between them", dev["switches"] >= case.nproc - 1,
          f"{dev['switches']} switches, costing {dev['switch_s']} s")
    sliced = [f for f in findings if f.code == "gpu-time-sliced"]
    check(f"{case.name}: gpu-time-sliced found", bool(sliced), sliced[0].title if sliced else "no finding")
    return figures


def sharing_experiment(tmp: str, python: str, quick: bool, kernels: int, kernel_ms: float,
                       deadline: float) -> list[dict]:
    """The cases in turn; a case that could not end before ``deadline`` (time.monotonic) is not
    started, and says so as a failed check."""
    from gpuscope.findings.engine import analyse_run
    from gpuscope.gpu import mps
    from gpuscope.nsys.report import load_report
    from gpuscope.telemetry.gpu import open_backend

    backend = open_backend()
    state = mps.detect(backend)
    backend.close()
    check("MPS is off for the sharing experiment", not state.active, state.describe())
    if state.active:
        return [{"mps": state.to_dict()}]
    from gpuscope.errors import UserError
    from gpuscope.nsys.locate import find_nsys

    try:
        nsys = find_nsys()
    except UserError as exc:
        check("nsys for the sharing experiment", False, str(exc))
        return [{"mps": state.to_dict()}]
    print(f"gpu_smoke: recording with nsys {nsys.version} ({nsys.nsys})", flush=True)
    cycles = int(calibrate(python) * kernel_ms)
    out: list[dict] = [{"mps": state.to_dict(), "kernel_ms": kernel_ms, "kernels_per_process": kernels,
                        "sleep_cycles": cycles, "nsys": nsys.version}]
    for case in cases(quick):
        t = time.monotonic()
        if t + CASE_TIMEOUT_S > deadline:
            check(f"{case.name}: recorded under nsys", False, "not started: the call's --budget is spent")
            continue
        run_dir, pids = run_case(tmp, python, case, kernels, cycles)
        if run_dir is None or not pids:
            check(f"{case.name}: recorded under nsys", False, f"run folder {run_dir}, workers {pids}")
            continue
        report = load_report(Path(run_dir))
        figures = sharing_checks(case, report, pids, kernels, kernel_ms, analyse_run(Path(run_dir)))
        figures["wall_s"] = round(time.monotonic() - t, 1)
        out.append(figures)
    return out


# --------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[5:]))
    ap.add_argument("--python", default=sys.executable, help="interpreter with CUDA torch for the job")
    ap.add_argument("--seconds", type=float, default=8.0, help="how long the telemetry job computes")
    ap.add_argument("--out", metavar="FIGURES.json", help="write the figures of every check as JSON")
    ap.add_argument("--quick", action="store_true",
                    help="sharing: 2 processes (spawn, fork) and the one-process reference only")
    ap.add_argument("--kernels", type=int, default=40, help="sharing: kernels per process (default 40)")
    ap.add_argument("--kernel-ms", type=float, default=5.0, help="sharing: length of each kernel (default 5 ms)")
    ap.add_argument("--budget", type=float, default=540.0,
                    help="seconds for the whole call (default 540): sharing cases that could not end in it are "
                         "not started")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--skip-sharing", action="store_true", help="only the telemetry and findings checks")
    which.add_argument("--sharing-only", action="store_true", help="only the sharing experiment")
    args = ap.parse_args()
    started = time.monotonic()
    preflight(args.python)
    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpuscope-smoke-") as tmp:
        if not args.sharing_only:
            telemetry_and_findings(tmp, args)
        if not args.skip_sharing:
            figures["sharing"] = sharing_experiment(tmp, args.python, args.quick, args.kernels, args.kernel_ms,
                                                    started + args.budget)
    figures["checks"] = [{"name": n, "ok": ok, "detail": d} for n, ok, d in results]
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1, default=str))
    failed = [name for name, ok, _ in results if not ok]
    print(f"gpu_smoke: {len(results) - len(failed)}/{len(results)} checks passed", flush=True)
    return 1 if failed else 0





def telemetry_and_findings(tmp: str, args: argparse.Namespace) -> None:
    from gpuscope.telemetry.sampler import RunSampler

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


if __name__ == "__main__":
    raise SystemExit(main())
