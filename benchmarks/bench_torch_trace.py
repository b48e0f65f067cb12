"""Reading a big PyTorch profiler trace: gpuscope's streaming reader against ``json.load`` and HTA's
loader (``traceinsight``, not a gpuscope dependency), time and peak memory, on the same file.

The file (>= 1 GB by default) is made by replicating the events of a real trace (each copy shifted
in time, its ids offset), written to a temporary folder and deleted at the end. Each loader runs in
its own process; its peak RSS is the kernel's ``VmHWM``, its CPU time ``time.process_time()``
(steadier than wall time on a shared machine). Rounds alternate the loaders; the median
is printed. Figures and the machine's load: docs/TORCH-PROFILER.md ("Reading").

    .venv/bin/python benchmarks/bench_torch_trace.py [--size-mb 1100] [--rounds 3] [--source TRACE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

LOADERS = ("gpuscope", "gpuscope+table", "json.load", "hta-json", "hta-ijson")


def _hwm_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def _load_gpuscope(path: str) -> int:
    from gpuscope.torchtrace.reader import read_trace

    return len(read_trace(path))


def _load_gpuscope_table(path: str) -> int:
    from gpuscope.torchtrace.ops import key_averages
    from gpuscope.torchtrace.reader import read_trace

    tr = read_trace(path)
    key_averages(tr)
    return len(tr)


def _load_json(path: str) -> int:
    with open(path, "rb") as f:
        return len(json.load(f)["traceEvents"])


def _load_hta(path: str, backend: str) -> int:
    import logging

    from hta.common.trace_parser import parse_trace_dataframe
    from hta.configs.parser_config import ParserBackend, ParserConfig

    logging.disable(logging.WARNING)
    cfg = ParserConfig()
    cfg.parser_backend = ParserBackend(backend)
    return len(parse_trace_dataframe(path, cfg)[1])


CHILD: dict[str, Callable[[str], int]] = {
    "gpuscope": _load_gpuscope, "gpuscope+table": _load_gpuscope_table, "json.load": _load_json,
    "hta-json": lambda p: _load_hta(p, "json"), "hta-ijson": lambda p: _load_hta(p, "ijson_batch_and_compress"),
}


def child(loader: str, path: str) -> None:
    import warnings

    warnings.simplefilter("ignore")
    t0, c0 = time.perf_counter(), time.process_time()
    n = CHILD[loader](path)
    print(json.dumps({"loader": loader, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                      "hwm_mb": _hwm_kb() / 1024, "events": n}))


def _real_trace(tmp: Path) -> Path:
    """A real trace to replicate: a short CPU training loop profiled with shapes and memory."""
    script = (
        "import sys, torch\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
        "x = torch.randn(32, 64)\n"
        "with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as p:\n"
        "    for _ in range(20):\n"
        "        loss = m(x).sum(); opt.zero_grad(); loss.backward(); opt.step(); p.step()\n"
        "p.export_chrome_trace(sys.argv[1])\n")
    out = tmp / "source.pt.trace.json"
    subprocess.run([sys.executable, "-c", script, str(out)], check=True, capture_output=True, timeout=600)
    return out


def make_big(source: Path, out: Path, size_mb: int) -> int:
    """Write ``out``: ``source``'s metadata and its events again and again, until ``size_mb``."""
    raw = source.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = [e for e in doc.pop("traceEvents") if isinstance(e.get("pid"), int)]
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000.0
    target, written, copies = size_mb << 20, 0, 0
    with open(out, "w") as f:
        head = json.dumps(doc)[:-1]
        f.write(head + ', "traceEvents": [\n')
        first = True
        while written < target:
            shift = copies * span
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(e["ts"] + shift, 3)
                args = e2.get("args")
                if isinstance(args, dict) and "External id" in args:
                    e2["args"] = {**args, "External id": args["External id"] + copies * 1_000_000}
                line = ("" if first else ",\n") + json.dumps(e2)
                first = False
                f.write(line)
                written += len(line)
            copies += 1
        f.write("\n]}\n")
    return copies * len(events)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size-mb", type=int, default=1100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--source", help="a real trace to replicate (default: profile a short loop now)")
    p.add_argument("--loaders", default=",".join(LOADERS))
    p.add_argument("--child", nargs=2, metavar=("LOADER", "PATH"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(*a.child)
        return
    loaders = a.loaders.split(",")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # a stop still deletes the big file
    with tempfile.TemporaryDirectory(prefix="bench-torch-trace-") as d:
        tmp = Path(d)
        source = Path(a.source) if a.source else _real_trace(tmp)
        big = tmp / "big.pt.trace.json"
        t0 = time.perf_counter()
        n = make_big(source, big, a.size_mb)
        size = big.stat().st_size
        print(f"trace: {size / 2**20:.0f} MiB, {n} events (replicated from {source.name}) in "
              f"{time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in loaders}
        for r in range(a.rounds):
            order = loaders if r % 2 == 0 else loaders[::-1]
            for name in order:
                done = subprocess.run([sys.executable, __file__, "--child", name, str(big)], capture_output=True,
                                      text=True)
                if done.returncode != 0:
                    print(f"  {name}: failed ({done.stderr.strip().splitlines()[-1:]})", flush=True)
                    continue
                got = json.loads(done.stdout.strip().splitlines()[-1])
                results[name].append(got)
                print(f"  round {r + 1} {name}: {got['wall_s']:.1f} s ({got['cpu_s']:.1f} s CPU), "
                      f"peak {got['hwm_mb']:.0f} MiB, "
                      f"{got['events']} events (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"\nmedian of {a.rounds} rounds, {size / 2**20:.0f} MiB file:")
        for name, rows in results.items():
            if rows:
                print(f"  {name:<16} {statistics.median(x['wall_s'] for x in rows):7.1f} s  "
                      f"CPU {statistics.median(x['cpu_s'] for x in rows):7.1f} s  "
                      f"peak {statistics.median(x['hwm_mb'] for x in rows):7.0f} MiB")


if __name__ == "__main__":
    main()
