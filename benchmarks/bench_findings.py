"""Cost of the findings rules: per live tick for a 64-process run, and after a run of 1 M ranges.

Live (``FindingsRecorder``): ``on_batch`` with a real ``SampleBatch`` of 64 ``ProcSample`` rows
(what the sampler hands every listener each tick), against a listener that does nothing, without
and with GPU rows (64 processes on 8 GPUs: the telemetry rules' GPU path); the watchdog's poll
(every 0.5 s: new ``I`` lines and the size of 128 event-log files) on a run folder of 64
processes, and the telemetry rules' evaluation there (cow-lost, input-bound, cuda-contexts,
idle-gpu-memory) after 600 ticks.

After the run (``analyse_run``): a run folder of 16 pool workers x 62,500 task ranges (1 M),
written with the injection's own writer (``pack_ranges``), plus a main process: the time to read
the event logs (``read_run_events``, gpuscope.trace.events) and the rules' own time, separately;
and the rules on 8 torchrun ranks x 125,000 ranges of 4 names (1 M: the straggler rule's path).

Inside the program: the cost ``inject/pickwatch.py`` adds to one ``ForkingPickler.dumps`` of a
small task (a tuple of an int and a short string, as pool tasks often are), against the same call
unwrapped (a subclass is wrapped, multiprocessing's own class is left alone).

    python benchmarks/bench_findings.py [--rounds 5]

Each figure is the median over ``--rounds`` alternated rounds, with the spread (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICKLED = {"bytes": 5000, "calls": 10, "max_bytes": 500, "seconds": 0.01}   # one `I` line of pickle counts
sys.path.insert(0, str(ROOT))

from gpuscope.findings import engine, process_rules  # noqa: E402
from gpuscope.findings.recorder import FindingsRecorder, _folder_bytes  # noqa: E402
from gpuscope.inject.eventlog import pack_ranges  # noqa: E402
from gpuscope.telemetry.batch import DeviceSample, GpuProcessSample, ProcSample, SampleBatch  # noqa: E402
from gpuscope.trace.events import read_run_events  # noqa: E402


def batch(n: int = 64, seq: int = 0, gpus: int = 0) -> SampleBatch:
    procs = tuple(ProcSample(1000 + i, 999, "gs:pool", "S", 0.5 * (i % 3), 50 << 20, None, 3, None, None)
                  for i in range(n))
    devices = tuple(DeviceSample(d, "GPU", f"GPU-{d}", 50.0, 10.0, 1 << 30, 80 << 30, 50.0, 300.0, 1500)
                    for d in range(gpus))
    gpu_procs = tuple(GpuProcessSample(1000 + i, i % gpus, 1 << 30, 20.0) for i in range(n)) if gpus else ()
    return SampleBatch(seq, time.monotonic_ns(), time.time_ns(), None, procs, devices, gpu_procs)


def write_process(folder: Path, pid: int, ppid: int, role: str, method: str, ranges: int, t0: int,
                  names: int = 1) -> None:
    header = {"v": 1, "pid": pid, "ppid": ppid, "role": "spawn child" if role == "pool worker" else role,
              "start_method": method, "rank": None, "forked": False, "anchor_mono_ns": t0,
              "anchor_wall_ns": 1_700_000_000_000_000_000 + t0}
    kind = "task" if role == "pool worker" else "nvtx"
    lines = [f"H\t{json.dumps(header)}\n", f"I\t{t0 + 1}\t{json.dumps({'role': role})}\n",
             f"I\t{t0 + 2}\t{json.dumps({'pickled': PICKLED})}\n"]
    lines += [f"S\t{n}\t{kind}\t\twork{n}\t\n" for n in range(names)]
    (folder / f"{pid}-{t0}.log").write_text("".join(lines))
    with open(folder / f"{pid}-{t0}.ranges", "wb") as fh:
        start = t0 + 200_000_000
        for block in range(0, ranges, 4096):       # one block per flush, as the injection writes them
            rows = [(start + k * 4_000, start + k * 4_000 + 1_000, pid, k % names, "P")
                    for k in range(block, min(ranges, block + 4096))]
            fh.write(pack_ranges(rows))


def make_run(root: Path, workers: int, per_worker: int) -> Path:
    events = root / "events"
    events.mkdir(parents=True)
    write_process(events, 100, 1, "main", "spawn", 0, 1_000_000)
    for w in range(workers):
        write_process(events, 200 + w, 100, "pool worker", "spawn", per_worker, 2_000_000 + w)
    (root / "stderr.log").write_bytes(b"ok\n" * 1000)
    return root


def make_ranks(root: Path, ranks: int, per_rank: int) -> Path:
    events = root / "events"
    events.mkdir(parents=True)
    write_process(events, 100, 1, "torchrun agent", "default", 0, 1_000_000)
    for r in range(ranks):
        write_process(events, 300 + r, 100, f"rank {r}", "default", per_rank, 2_000_000 + r, names=4)
    (root / "stderr.log").write_bytes(b"ok\n" * 1000)
    return root


def pickle_pair():
    """(plain dumps, wrapped dumps) of a ForkingPickler subclass each: the same call, one counted."""
    import types
    from multiprocessing.reduction import ForkingPickler

    from gpuscope.inject import pickwatch

    class Plain(ForkingPickler):
        pass

    class Counted(ForkingPickler):
        pass
    Counted.dumps = classmethod(ForkingPickler.dumps.__func__)
    pickwatch.patch(types.SimpleNamespace(ForkingPickler=Counted))
    task = (12345, "a short task")
    return (lambda: Plain.dumps(task)), (lambda: Counted.dumps(task))


def time_ms(fn, repeat: int) -> float:
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) * 1e3 / repeat


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.3f}  ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gpuscope-bench-findings-"))
    big = make_run(tmp / "big", 16, 62_500)
    ranks_dir = make_ranks(tmp / "ranks", 8, 125_000)
    live_dir = make_run(tmp / "live", 64, 10)
    rec = FindingsRecorder()
    rec.run_dir = str(live_dir)
    b = batch()
    bg = batch(gpus=8)
    results: dict[str, list[float]] = {k: [] for k in (
        "noop listener (µs/tick)", "on_batch (µs/tick)", "on_batch, GPU rows (µs/tick)",
        "watchdog poll, 64 procs (µs)", "telemetry rules (µs)", "read 1M ranges (ms)",
        "rules on 1M ranges (ms)", "analyse_run 1M (ms)", "rules on 1M rank ranges (ms)",
        "ForkingPickler.dumps (µs)", "dumps, counted (µs)")}
    plain, counted = pickle_pair()
    for _ in range(args.rounds):                     # alternated: every measure once per round
        results["noop listener (µs/tick)"].append(1e3 * time_ms(lambda: (lambda _b: None)(b), 20000))
        results["on_batch (µs/tick)"].append(1e3 * time_ms(lambda: rec.on_batch(b), 20000))
        gpu_rec = FindingsRecorder()
        results["on_batch, GPU rows (µs/tick)"].append(1e3 * time_ms(lambda r=gpu_rec: r.on_batch(bg), 5000))
        results["telemetry rules (µs)"].append(1e3 * time_ms(gpu_rec._telemetry_findings, 200))
        results["ForkingPickler.dumps (µs)"].append(1e3 * time_ms(plain, 20000))
        results["dumps, counted (µs)"].append(1e3 * time_ms(counted, 20000))
        facts = process_rules.ProcessFacts()

        def poll(facts: process_rules.ProcessFacts = facts) -> None:
            process_rules.scan_info(live_dir / "events", facts)
            _folder_bytes(str(live_dir / "events"))
        results["watchdog poll, 64 procs (µs)"].append(1e3 * time_ms(poll, 200))
        t = time.perf_counter()
        events = read_run_events(big)
        results["read 1M ranges (ms)"].append((time.perf_counter() - t) * 1e3)
        assert sum(len(e.ranges) for e in events) == 16 * 62_500
        t = time.perf_counter()
        found = engine.analyse_events(big, events)
        results["rules on 1M ranges (ms)"].append((time.perf_counter() - t) * 1e3)
        assert any(f.code == "tasks-too-small" for f in found), [f.code for f in found]
        results["analyse_run 1M (ms)"].append(time_ms(lambda: engine.analyse_run(big), 1))
        rank_events = read_run_events(ranks_dir)
        t = time.perf_counter()
        engine.analyse_events(ranks_dir, rank_events)
        results["rules on 1M rank ranges (ms)"].append((time.perf_counter() - t) * 1e3)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
          f"rounds {args.rounds}")
    for name, values in results.items():
        print(f"{name:32s} {spread(values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
