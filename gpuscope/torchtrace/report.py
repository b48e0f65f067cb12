"""The torch-ops report of a run: per rank the ``key_averages`` table, the operators over ranks,
the steps and the straggler, as JSON (``gpuscope report RUN --torch-ops --json``) or text."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuscope.errors import UserError
from gpuscope.torchtrace import ranks as R
from gpuscope.torchtrace.ops import SORT_KEYS, OpRow, key_averages, sort_rows
from gpuscope.torchtrace.reader import TorchTrace, merge
from gpuscope.torchtrace.run import TorchRun, load_run


@dataclass
class RankOps:
    """One rank's trace and table."""

    rank: int
    trace: TorchTrace
    ops: list[OpRow]
    steps: list[R.Step]


@dataclass
class TorchOps:
    """Everything the report shows of a run's torch traces."""

    ranks: list[RankOps] = field(default_factory=list)
    across: list[R.CrossRow] = field(default_factory=list)
    steps: list[R.StepRow] = field(default_factory=list)
    straggler: R.Straggler | None = None
    problems: list[str] = field(default_factory=list)
    sort: str = "self_cpu"
    collectives: list[R.Collective] = field(default_factory=list)


def build(run: TorchRun, rank: int | None = None, sort: str = "self_cpu", by_shapes: bool = False) -> TorchOps:
    """The tables of ``run`` (of one rank with ``rank``), rows sorted by ``sort``."""
    if sort not in SORT_KEYS:
        raise UserError(f"--sort {sort!r}: choose one of {', '.join(SORT_KEYS)}")
    out = TorchOps(problems=list(run.problems), sort=sort)
    for pos, tr in enumerate(_per_process(run.traces)):
        r = R.rank_of(tr, pos)
        out.ranks.append(RankOps(r, tr, sort_rows(key_averages(tr, by_shapes), sort), R.steps_of(tr, r)))
    if rank is not None:
        if not any(x.rank == rank for x in out.ranks):
            have = ", ".join(str(x.rank) for x in out.ranks) or "none"
            raise UserError(f"--rank {rank}: the run has no torch trace of that rank (ranks: {have})")
        out.ranks = [x for x in out.ranks if x.rank == rank]
    out.across = R.across_ranks({x.rank: x.ops for x in out.ranks}, SORT_KEYS[sort])
    steps = {x.rank: x.steps for x in out.ranks}
    out.collectives = R.collectives({x.rank: x.trace for x in out.ranks}, steps)
    out.steps = R.step_table(steps, R.waits_by_step(out.collectives, steps))
    out.straggler = R.straggler(out.steps)
    return out


def _per_process(traces: list[TorchTrace]) -> list[TorchTrace]:
    """A process's several traces (a schedule's cycles) joined into one, in the traces' order."""
    groups: dict[tuple[int | None, int], list[TorchTrace]] = {}
    for tr in traces:
        groups.setdefault((tr.rank, tr.pid), []).append(tr)
    return [merge(sorted(g, key=lambda t: int(t.cols["ts_ns"].min()) if len(t) else 0)) for g in groups.values()]


def torch_ops(run_dir: str | Path, rank: int | None = None, sort: str = "self_cpu",
              by_shapes: bool = False) -> TorchOps:
    """Read the run's traces and build its tables; a run without torch traces is a UserError."""
    run = load_run(run_dir)
    if not run.traces and not run.problems:
        raise UserError(f"{run_dir}: no torch traces in this run (record one with gpuscope run --torch-profile)")
    if not run.traces:
        raise UserError("; ".join(run.problems))
    return build(run, rank, sort, by_shapes)


def _clock(tr: TorchTrace) -> dict[str, Any]:
    measured = tr.clock_uncertainty_ns is not None
    return {"offset_ns": tr.clock_offset_ns, "uncertainty_ns": tr.clock_uncertainty_ns,
            "clock": "gpuscope monotonic" if measured or tr.clock_offset_ns else "trace (wall clock)"}


def clock_text(tr: TorchTrace) -> str:
    """How the trace's times were put on gpuscope's clock, in words."""
    if tr.clock_uncertainty_ns is not None:
        return f"on gpuscope's clock ±{tr.clock_uncertainty_ns / 1000:.1f} µs"
    if tr.clock_offset_ns:
        return "on gpuscope's clock (uncertainty not measured)"
    return "on the trace's own wall clock (no offset measured)"


def to_json(t: TorchOps) -> dict[str, Any]:
    """``{"ranks": [{"rank", "pid", "ops": [...]}], "ops_across_ranks": [...], "steps": [...]}``."""
    return {
        "ranks": [{"rank": x.rank, "pid": x.trace.pid, "path": x.trace.path, "events": len(x.trace),
                   "clock": _clock(x.trace), "ops": [op.to_dict() for op in x.ops]} for x in t.ranks],
        "ops_across_ranks": [row.to_dict() for row in t.across],
        "steps": [row.to_dict() for row in t.steps],
        "straggler": t.straggler.to_dict() if t.straggler else None,
        "sort": t.sort,
        "problems": t.problems,
    }


def print_text(t: TorchOps, out: IO[str], limit: int = 15) -> None:
    """Per rank the first ``limit`` rows, the steps, the straggler, then the problems."""
    for x in t.ranks:
        out.write(f"\nTorch ops, rank {x.rank} (pid {x.trace.pid}), by {t.sort}; {clock_text(x.trace)}:\n")
        memory = any(op.cpu_mem or op.cuda_mem for op in x.ops)      # recorded with profile_memory
        shapes = any(op.shapes for op in x.ops)
        out.write(f"  {'name':<48} {'count':>6} {'self CPU':>11} {'CPU total':>11} {'self CUDA':>11} "
                  f"{'CUDA total':>11}" + (f" {'CPU mem':>10} {'CUDA mem':>10}" if memory else "")
                  + ("  input shapes" if shapes else "") + "\n")
        for op in x.ops[:limit]:
            out.write(f"  {op.name[:48]:<48} {op.count:>6} {_ms(op.self_cpu_us):>11} {_ms(op.cpu_total_us):>11} "
                      f"{_ms(op.self_cuda_us):>11} {_ms(op.cuda_total_us):>11}"
                      + (f" {_mib(op.cpu_mem):>10} {_mib(op.cuda_mem):>10}" if memory else "")
                      + (f"  {op.shapes[:60]}" if shapes else "") + "\n")
    if len(t.ranks) > 1 and t.across:
        out.write(f"\nOperators over ranks ({SORT_KEYS[t.sort]}, largest spread first):\n")
        for row in t.across[:limit]:
            d = row.to_dict()
            out.write(f"  {row.name[:48]:<48} median {_ms(d['median_us'])}  min {_ms(d['min_us'])}  "
                      f"max {_ms(d['max_us'])}  slowest rank {d['slowest_rank']}\n")
    if t.steps:
        out.write("\nSteps (ms per rank):\n")
        for st in t.steps:
            per = "  ".join(f"r{r} {v / 1000:.2f} (waits {st.wait_by_rank.get(r, 0) / 1000:.2f})"
                            for r, v in st.by_rank.items())
            out.write(f"  step {st.step:<5} {per}   slowest rank {st.slowest_rank}\n")
    if t.straggler:
        g = t.straggler
        out.write(f"\nStraggler: rank {g.rank}, slowest in {g.steps_slowest} of {g.steps} steps "
                  f"({g.extra_us / 1000:.2f} ms more work than the other ranks' median; time waiting in "
                  "collectives left out)\n")
    for line in t.problems:
        out.write(f"! {line}\n")


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f}MiB"


def _ms(us: float) -> str:
    return f"{us / 1000:.3f}ms"
