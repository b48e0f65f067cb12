"""Rules on the PyTorch profiler traces of a run (``gpuscope run --torch-profile`` or the traces a
program writes itself): the slowest rank and its operators, ranks waiting in collectives, steps
spent in the DataLoader, and with CUDA a GPU idle between kernels and syncs inside the step loop.

The detection is :mod:`gpuscope.torchtrace.checks` (thresholds: docs/TORCH-PROFILER.md); the
traces are read once for the five rules. Imports of numpy and the reader stay inside the checks:
every run's end imports this module.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.findings.registry import Input, RunInputs, rule

if TYPE_CHECKING:
    from gpuscope.torchtrace.report import TorchOps

TORCH = Input.TORCH
SLOW_FIX = ("every other rank waits for this one at each collective: make its share of the work equal "
            "(the operators listed take longer on it: uneven batch or sequence lengths, a rank-only branch "
            "such as logging or evaluation on rank 0, a slower device or a CPU contended by other processes)")
WAIT_FIX = ("the time in collectives is time waiting for the slowest rank, not communication: balance the "
            "work per rank (see the slow-rank finding) before tuning the collectives themselves")
LOADER_FIX = ("the step waits for its batch: load in parallel (DataLoader(num_workers=N, persistent_workers=True, "
              "prefetch_factor=2)), pin memory for GPU copies (pin_memory=True), and move per-item work "
              "(decoding, augmentation) out of __getitem__ or onto the GPU")
LAUNCH_FIX = ("the GPU finishes each kernel before the host launches the next: launch fewer, larger kernels "
              "(torch.compile, CUDA graphs via torch.compile(mode=\"reduce-overhead\"), a larger batch), and keep "
              "host work out of the step loop")
SYNC_FIX = ("each call waits until the GPU has finished all queued work, so the host cannot run ahead: keep "
            "values on the GPU inside the loop (accumulate a tensor, call .item()/.cpu() once per epoch or every "
            "N steps), drop torch.cuda.synchronize() outside benchmarks")


def _has_traces(run: RunInputs) -> bool:
    from gpuscope.torchtrace.run import has_traces

    return has_traces(run.run_dir)


def _stamp(run_dir: str) -> tuple[tuple[str, int, int], ...]:
    from gpuscope.torchtrace.run import find_traces

    out = []
    for ref in find_traces(run_dir):
        try:
            st = os.stat(ref.path)
            out.append((ref.path, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((ref.path, -1, -1))
    return tuple(out)


@lru_cache(maxsize=2)
def _ops(run_dir: str, stamp: tuple[tuple[str, int, int], ...]) -> TorchOps:
    from gpuscope.torchtrace.report import build
    from gpuscope.torchtrace.run import load_run

    return build(load_run(run_dir))


def ops_of(run: RunInputs) -> TorchOps:
    """The run's torch tables, read once for the rules."""
    return _ops(run.run_dir, _stamp(run.run_dir))


def _ms(us: float) -> float:
    return round(us / 1000, 3)


@rule("torch-slow-rank", inputs=TORCH, applies=_has_traces,
      title="one rank does more work per step than the others: they wait for it")
def slow_rank_rule(run: RunInputs) -> list[Finding]:
    from gpuscope.torchtrace.checks import slow_rank

    found = slow_rank(ops_of(run))
    if found is None:
        return []
    ops = ", ".join(f"{name} (+{us / 1000:.1f} ms)" for name, us in found.ops) or "none stands out"
    return [Finding("torch-slow-rank",
                    f"rank {found.rank} is the slowest in {found.steps_slowest} of {found.steps} profiled steps: "
                    f"{found.extra_us_per_step / 1000:.1f} ms more work per step than the others; operators that "
                    f"make the difference over those steps: {ops}",
                    SLOW_FIX, Severity.WARNING, pids=(found.pid,),
                    evidence=evidence({"extra work per step ms": _ms(found.extra_us_per_step),
                                       "median step ms": _ms(found.median_step_us),
                                       "steps slowest": found.steps_slowest, "steps": found.steps},
                                      [f"{name}: +{us / 1000:.3f} ms on rank {found.rank} over the others' median"
                                       for name, us in found.ops], pids=(found.pid,)))]


@rule("torch-collective-wait", inputs=TORCH, applies=_has_traces,
      title="ranks spend their steps waiting in collectives for a slower rank")
def collective_wait_rule(run: RunInputs) -> list[Finding]:
    from gpuscope.torchtrace.checks import collective_waits

    out = []
    for w in collective_waits(ops_of(run)):
        share = w.wait_us / w.step_us
        whom = f"rank {w.waited_for}" if w.waited_for >= 0 else "a later rank"
        out.append(Finding("torch-collective-wait",
                           f"rank {w.rank} spends {share:.0%} of its profiled steps ({w.wait_us / 1000:.1f} ms) "
                           f"in collectives waiting for {whom}", WAIT_FIX, Severity.WARNING, pids=(w.pid,),
                           evidence=evidence({"waiting ms": _ms(w.wait_us), "step time ms": _ms(w.step_us),
                                              "share": round(share, 3)}, pids=(w.pid,))))
    return out


@rule("torch-dataloader-wait", inputs=TORCH, applies=_has_traces,
      title="a training step mostly waits for the DataLoader")
def dataloader_rule(run: RunInputs) -> list[Finding]:
    from gpuscope.torchtrace.checks import dataloader_waits

    return [Finding("torch-dataloader-wait",
                    f"rank {w.rank}: {w.share:.0%} of a step ({w.loader_us_per_step / 1000:.1f} ms) is spent "
                    "getting the next batch from the DataLoader", LOADER_FIX, Severity.WARNING, pids=(w.pid,),
                    evidence=evidence({"share of the step": round(w.share, 3),
                                       "DataLoader ms per step": _ms(w.loader_us_per_step)}, pids=(w.pid,)))
            for w in dataloader_waits(ops_of(run))]


@rule("torch-launch-bound", inputs=TORCH, applies=_has_traces,
      title="the GPU waits between kernels inside a step (launch-bound)")
def launch_bound_rule(run: RunInputs) -> list[Finding]:
    from gpuscope.torchtrace.checks import launch_bound

    return [Finding("torch-launch-bound",
                    f"rank {b.rank}: the GPU is idle {b.idle_share:.0%} of the time between a step's first and last "
                    f"kernel ({b.kernels_per_step:.0f} kernels per step, median {b.median_kernel_us:.1f} µs each)",
                    LAUNCH_FIX, Severity.WARNING, pids=(b.pid,),
                    evidence=evidence({"GPU idle share": round(b.idle_share, 3),
                                       "kernels per step": b.kernels_per_step,
                                       "median kernel µs": round(b.median_kernel_us, 3)}, pids=(b.pid,)))
            for b in launch_bound(ops_of(run))]


@rule("torch-sync-in-step", inputs=TORCH, applies=_has_traces,
      title="calls that wait for the GPU inside the step loop (.item(), .cpu(), synchronize)")
def sync_rule(run: RunInputs) -> list[Finding]:
    from gpuscope.torchtrace.checks import sync_calls

    return [Finding("torch-sync-in-step",
                    f"rank {s.rank}: {s.calls_per_step:.1f} GPU-synchronising calls per step in {s.steps_with} of "
                    f"{s.steps} steps, {s.blocked_us_per_step / 1000:.2f} ms blocked per step"
                    + (f", from {', '.join(s.callers)}" if s.callers else ""),
                    SYNC_FIX, Severity.WARNING, pids=(s.pid,),
                    evidence=evidence({"calls per step": round(s.calls_per_step, 2),
                                       "blocked ms per step": _ms(s.blocked_us_per_step)},
                                      [f"called from {c}" for c in s.callers], pids=(s.pid,)))
            for s in sync_calls(ops_of(run))]
