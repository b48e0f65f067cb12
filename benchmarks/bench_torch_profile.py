"""The PyTorch profiler's own cost per training step: ``gpuscope run --torch-profile`` against the
same job without it, and against the profiler written into the script by hand.

    python benchmarks/bench_torch_profile.py [--rounds 7] [--steps 200] [--width 256] [--shapes]

One small training loop (an MLP on CPU, SGD), four sides, alternated round by round (the order
rotates, so each side meets the same load):

- ``python``: the script run by python, no profiler;
- ``gpuscope``: ``gpuscope run`` without ``--torch-profile`` (gpuscope's hook, no profiler);
- ``--torch-profile``: ``gpuscope run --torch-profile`` (gpuscope's profiler, the whole process);
- ``by hand``: python, the script wrapping its loop in ``torch.profiler.profile`` with the same
  activities and options and exporting a gzip trace at the end, as a user would write it.

The script times each step itself (``time.perf_counter_ns`` around the step, after ``--warmup``
steps, and the loop thread's CPU time, ``time.thread_time_ns``: steadier on a shared machine, and
the profiler's callbacks run on that thread) and prints the medians. Reported for both, per side:
the median of the rounds' medians and their spread (min-max), and each profiled side's ratio to
its unprofiled one (the median, min-max, of each round's own ratio: the sides of a round ran one
after the other). Only the steps count: the start-up and the trace's export at exit are not in
these figures. Figures go to
docs/TORCH-PROFILER.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIDES = ("python", "gpuscope", "--torch-profile", "by hand")


def child(steps: int, warmup: int, width: int, by_hand: bool, shapes: bool, out: str) -> None:
    """The training loop: prints {"step_ns": median} on stdout's last line."""
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                                torch.nn.ReLU(), torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, width), torch.randint(0, 10, (32,))
    prof = None
    if by_hand:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=shapes)
        prof.start()
    times, cpu = [], []
    for i in range(warmup + steps):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter_ns() - t0)
            cpu.append(time.thread_time_ns() - c0)
    if prof is not None:
        prof.stop()
        prof.export_chrome_trace(os.path.join(out, "by_hand.json.gz"))
    print(json.dumps({"step_ns": statistics.median(times), "step_cpu_ns": statistics.median(cpu)}), flush=True)


def _command(side: str, args: argparse.Namespace, out: str) -> list[str]:
    loop = [__file__, "--child", "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--width", str(args.width), "--out", out] + (["--shapes"] if args.shapes else [])
    if side == "python":
        return [sys.executable, *loop]
    if side == "by hand":
        return [sys.executable, *loop, "--by-hand"]
    profile = ["--torch-profile"] + (["--torch-profile-shapes"] if args.shapes else []) if side != "gpuscope" else []
    return [sys.executable, "-m", "gpuscope", "run", "-q", *profile, *loop]


def _one(side: str, args: argparse.Namespace, env: dict[str, str]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(_command(side, args, out), env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"{side}: exit {done.returncode}: {done.stderr[-2000:]}")
        line = [ln for ln in done.stdout.splitlines() if ln.startswith('{"step_ns"')][-1]
        figures = json.loads(line)
        return float(figures["step_ns"]), float(figures["step_cpu_ns"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--shapes", action="store_true", help="record input shapes (both profiled sides)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--by-hand", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=".", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.steps, args.warmup, args.width, args.by_hand, args.shapes, args.out)
        return
    env = dict(os.environ)
    home = tempfile.mkdtemp(prefix="bench-torch-profile-")
    env["GPUSCOPE_HOME"] = home
    wall: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    for r in range(args.rounds):
        order = SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]
        for side in order:
            w, c = _one(side, args, env)
            wall[side].append(w)
            cpu[side].append(c)
        print(f"round {r + 1}: " + ", ".join(f"{s} {wall[s][-1] / 1e3:.0f} us ({cpu[s][-1] / 1e3:.0f} CPU)"
                                             for s in SIDES), flush=True)
    print(f"\n{args.steps} steps after {args.warmup}, width {args.width}, {args.rounds} alternated rounds; "
          f"load {os.getloadavg()[0]:.1f}")
    for title, results in (("per-step wall time", wall), ("per-step CPU time of the loop's thread", cpu)):
        _report(title, results)


def _report(title: str, results: dict[str, list[float]]) -> None:
    print(f"{title}:")
    for side in SIDES:
        v = results[side]
        print(f"  {side:16} median {statistics.median(v) / 1e3:8.1f} us  "
              f"(min-max {min(v) / 1e3:.1f}-{max(v) / 1e3:.1f})")
    for side, base in (("--torch-profile", "gpuscope"), ("by hand", "python"), ("--torch-profile", "by hand")):
        ratios = [a / b for a, b in zip(results[side], results[base])]
        print(f"  {side} / {base}: {statistics.median(ratios):.3f}x (min-max {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
