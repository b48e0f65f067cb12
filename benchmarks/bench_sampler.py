"""Sampler cost for a 64-process tree at 10 Hz, in CPU seconds per wall second (% of one core).

Compares, on the same tree of 64 sleeping processes (1 root, 7 children, 56 grandchildren):

* ``gpuscope``       RunSampler (process tree from /proc + host totals), NVML absent;
* ``gpuscope-tree``  the same without host totals;
* ``gpuscope-uss``   with USS read once a second per process (the optional, costly part);
* ``psutil-naive``   a 10 Hz loop: ``children(recursive=True)`` and, per process in ``oneshot()``,
                     cpu_percent, memory_info, num_threads, status, ppid; plus host totals;
* ``nvitop-host``    nvitop's ``HostProcess`` snapshots of the same tree (its per-process
                     collection: ``children(recursive=True)`` + ``as_snapshot(attrs=...)``);
* ``idle-loop``      a thread that wakes at 10 Hz and does nothing: the floor on this machine;
* ``nvitop-rmc``     nvitop's ``ResourceMetricCollector(root_pids=...).take_snapshots()`` (host
                     metrics only without a GPU: it samples GPU processes, not host ones).

Each mode runs in its own interpreter (``--inner``) so its CPU time (getrusage, all threads)
is the sampler's alone; the main thread only sleeps. nvitop modes need a Python with nvitop
(``--nvitop-python``, e.g. a throwaway venv: ``python -m venv /tmp/nv && /tmp/nv/bin/pip install nvitop``).

    python benchmarks/bench_sampler.py [--seconds 10] [--rounds 5] [--nvitop-python /tmp/nvitop-venv/bin/python]
                                       [--other-tree OLD_CHECKOUT]

``--other-tree`` adds ``gpuscope@other`` (and ``gpuscope-tree@other``): the same modes on another
source tree (e.g. an older commit from ``git archive``), alternated with this one's in the rounds.

With ``--rounds N`` the modes run N times in alternation (mode A, B, C, A, B, C, ...) and the
table gives each mode's median % of one core with the spread (min-max) over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TREE = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
for _ in range(7):
    if os.fork() == 0:
        for _ in range(8):
            if os.fork() == 0:
                time.sleep(3600); os._exit(0)
        time.sleep(3600); os._exit(0)
print("ready", flush=True)
time.sleep(3600)
"""


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def steady(interval: float, seconds: float, tick) -> int:
    """Call ``tick`` on a drift-free grid for ``seconds`` on a thread; returns ticks done."""
    stop, count = threading.Event(), [0]

    def loop() -> None:
        nxt = time.monotonic()
        while not stop.is_set():
            tick()
            count[0] += 1
            nxt += interval
            stop.wait(max(0.0, nxt - time.monotonic()))

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return count[0]


def inner_gpuscope(root: int, seconds: float, mode: str) -> dict:
    other = mode.endswith("@other")   # the same mode on the tree of --other-tree
    mode = mode.removesuffix("@other")
    sys.path.insert(0, os.environ["GS_BENCH_OTHER_TREE"] if other else str(ROOT))
    from gpuscope.telemetry.gpu import NoGpuBackend
    from gpuscope.telemetry.sampler import RunSampler

    s = RunSampler(root, 0.1, gpu=NoGpuBackend("bench"), host=(mode != "gpuscope-tree"),
                   uss_interval_s=1.0 if mode == "gpuscope-uss" else None)
    n = [0]
    sizes: list[int] = []
    def count(b: Any) -> None:
        n[0] += 1
        sizes.append(len(b.processes))

    s.add_listener(count)
    c0, w0 = cpu_s(), time.monotonic()
    s.start()
    time.sleep(seconds)
    s.stop(final_sample=False)
    res = {"ticks": n[0], "procs": max(sizes), "cpu": cpu_s() - c0, "wall": time.monotonic() - w0}
    res["hot_ms"] = hot_ms(s.sample_once)
    return res


def hot_ms(tick) -> float:
    """CPU ms of one tick run back to back (caches warm, no wake-up)."""
    t0 = time.thread_time()
    for _ in range(50):
        tick()
    return (time.thread_time() - t0) / 50 * 1000


def inner_idle(seconds: float) -> dict:
    c0, w0 = cpu_s(), time.monotonic()
    n = steady(0.1, seconds, lambda: None)
    return {"ticks": n, "procs": 0, "cpu": cpu_s() - c0, "wall": time.monotonic() - w0}


def inner_psutil(root: int, seconds: float) -> dict:
    import psutil

    cache: dict[int, psutil.Process] = {}
    top = psutil.Process(root)
    sizes: list[int] = []

    def tick() -> None:
        procs = [top, *top.children(recursive=True)]
        rows = []
        for p in procs:
            p = cache.setdefault(p.pid, p)
            try:
                with p.oneshot():
                    rows.append((p.cpu_percent(), p.memory_info().rss, p.num_threads(), p.status(), p.ppid()))
            except psutil.Error:
                pass
        psutil.cpu_percent(percpu=True), psutil.virtual_memory(), psutil.swap_memory()
        sizes.append(len(rows))

    c0, w0 = cpu_s(), time.monotonic()
    n = steady(0.1, seconds, tick)
    return {"ticks": n, "procs": max(sizes), "cpu": cpu_s() - c0, "wall": time.monotonic() - w0,
            "hot_ms": hot_ms(tick)}


def inner_nvitop(root: int, seconds: float, mode: str) -> dict:
    import nvitop
    from nvitop.api.process import HostProcess

    sizes: list[int] = []
    if mode == "nvitop-rmc":
        collector = nvitop.ResourceMetricCollector(root_pids={root}, interval=0.1)

        def tick() -> None:
            collector.take_snapshots()
            sizes.append(0)
    else:
        top = HostProcess(root)
        attrs = ["ppid", "name", "status", "cpu_percent", "memory_info", "num_threads"]

        def tick() -> None:
            procs = [top, *top.children(recursive=True)]
            snaps = []
            for p in procs:
                try:
                    snaps.append(p.as_snapshot(attrs=attrs))
                except Exception:  # noqa: BLE001 - a benchmark: a vanished process is skipped
                    pass
            sizes.append(len(snaps))

    c0, w0 = cpu_s(), time.monotonic()
    n = steady(0.1, seconds, tick)
    return {"ticks": n, "procs": max(sizes), "cpu": cpu_s() - c0, "wall": time.monotonic() - w0,
            "nvitop": nvitop.__version__, "hot_ms": hot_ms(tick)}


def run_inner(python: str, mode: str, root: int, seconds: float) -> dict:
    out = subprocess.run([python, __file__, "--inner", mode, "--root", str(root), "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(out.stdout)


def _runnable(mode: str, nvitop_python: str) -> bool:
    if mode.startswith("nvitop") and not Path(nvitop_python).exists():
        print(f"{mode:<20} skipped: no {nvitop_python}")
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--nvitop-python", default="/tmp/nvitop-venv/bin/python")
    ap.add_argument("--modes",
                    default="idle-loop,gpuscope,gpuscope-tree,gpuscope-uss,psutil-naive,nvitop-host,nvitop-rmc")
    ap.add_argument("--rounds", type=int, default=1, help="alternated rounds of all modes")
    ap.add_argument("--other-tree", help="also run the gpuscope modes on this source tree (@other)")
    ap.add_argument("--inner")
    ap.add_argument("--root", type=int)
    args = ap.parse_args()
    if args.inner:
        if args.inner.startswith("gpuscope"):
            res = inner_gpuscope(args.root, args.seconds, args.inner)
        elif args.inner == "idle-loop":
            res = inner_idle(args.seconds)
        elif args.inner == "psutil-naive":
            res = inner_psutil(args.root, args.seconds)
        else:
            res = inner_nvitop(args.root, args.seconds, args.inner)
        print(json.dumps(res))
        return 0
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))   # a killed benchmark kills its tree
    tree = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert tree.stdout is not None and tree.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        print(f"# {os.cpu_count()} CPUs, python {sys.version.split()[0]}, {args.seconds:.0f} s per mode, "
              f"10 Hz, tree of 64 processes, load average {os.getloadavg()[0]:.2f}")
        modes = [m for m in args.modes.split(",") if _runnable(m, args.nvitop_python)]
        if args.other_tree:
            os.environ["GS_BENCH_OTHER_TREE"] = str(Path(args.other_tree).resolve())
            modes += [m + "@other" for m in modes if m in ("gpuscope", "gpuscope-tree")]
        print(f"{'mode':<20} {'procs':>5} {'ticks':>5} {'CPU s/s':>8} {'% core':>7} {'ms/tick':>8} {'hot ms':>7}")
        rates: dict[str, list[float]] = {m: [] for m in modes}
        for rnd in range(args.rounds):
            for mode in modes:
                python = args.nvitop_python if mode.startswith("nvitop") else sys.executable
                r = run_inner(python, mode, tree.pid, args.seconds)
                if "error" in r:
                    print(f"{mode:<20} failed: {r['error']}")
                    continue
                rate = r["cpu"] / r["wall"]
                rates[mode].append(100 * rate)
                print(f"{mode:<20} {r['procs']:>5} {r['ticks']:>5} {rate:>8.4f} {100 * rate:>6.2f}% "
                      f"{1000 * r['cpu'] / max(r['ticks'], 1):>8.2f} {r.get('hot_ms', float('nan')):>7.2f}"
                      + (f"  (round {rnd + 1})" if args.rounds > 1 else ""), flush=True)
        if args.rounds > 1:
            print(f"# median % of one core over {args.rounds} alternated rounds (min-max); "
                  f"load average now {os.getloadavg()[0]:.2f}")
            for mode, vals in rates.items():
                if vals:
                    print(f"{mode:<20} {statistics.median(vals):6.2f}%  ({min(vals):.2f}-{max(vals):.2f})")
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
