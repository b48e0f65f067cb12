"""Rules on torchrun ranks: stragglers (after the run) and a collective one rank never joins (live).

- ``straggler-rank``: ranges of one name on every rank (``--annotate`` or NVTX, e.g. a forward or
  data-loading range) whose per-rank median differs by > ``STRAGGLER_RATIO`` (and by enough time
  to matter): the slow rank makes every other one wait at the next collective. A range that holds
  a collective is evened out by it (every rank waits for the slowest), so the spread shows in the
  ranges around it.
- ``rank-not-in-collective``: when the run looks stuck (``no-progress`` took the stacks), some
  ranks wait inside a collective (``torch.distributed``) or in ``backward`` (DDP's gradient
  all-reduce) while another rank is elsewhere, or has exited: the job hangs until the collective
  timeout. The finding names that rank and shows where each rank waits.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpuscope.finding import Finding, Severity, evidence, now_ns
from gpuscope.trace.events import ProcessEvents
from gpuscope.findings.registry import Input, OnStop, Phase, RunInputs, declare, rule

if TYPE_CHECKING:
    import numpy as np

STRAGGLER_RATIO = 1.5
MIN_RANGES = 3
MIN_GAP_S = 0.01          # the slow rank's median is at least this much longer
MIN_EXCESS_S = 0.2        # ... and that adds up to at least this much over its ranges

COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
               "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "barrier", "monitored_barrier",
               "reduce", "gather", "gather_object", "scatter", "scatter_object_list", "all_to_all",
               "all_to_all_single", "send", "recv", "isend", "irecv", "batch_isend_irecv", "wait"}
BACKWARD = {"backward", "_engine_run_backward", "run_backward"}


def _rank(role: str) -> int | None:
    return int(role.split()[1]) if role.startswith("rank ") and role.split()[1].isdigit() else None


# -- stragglers (after the run) ------------------------------------------------------------------------

def _per_name(pe: ProcessEvents) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """label -> (median duration s, t0s, t1s in start order) of this process's ranges, >= MIN_RANGES each."""
    if not pe.range_count:
        return {}
    import numpy as np

    r = pe.ranges
    nid = np.ascontiguousarray(r["nid"])            # one copy of each column: fancy indexing of a
    t0, t1 = np.ascontiguousarray(r["t0"]), np.ascontiguousarray(r["t1"])   # strided field is slow
    if nid[0] != nid[-1] or (nid != nid[0]).any():
        order = np.argsort(nid, kind="stable")      # ranges are in start order: kept within a name
        nid, t0, t1 = nid[order], t0[order], t1[order]
    cuts = np.flatnonzero(nid[1:] != nid[:-1]) + 1
    bounds = zip(np.r_[0, cuts], np.r_[cuts, len(nid)])
    out = {}
    for s, e in bounds:
        if e - s >= MIN_RANGES:
            a, b = t0[s:e], t1[s:e]
            out[pe.label(int(nid[s]))] = (float(np.median(b - a)) / 1e9, a, b)
    return out


def _ends_aligned(per: dict[int, tuple[float, np.ndarray, np.ndarray]]) -> bool:
    """Do the ranks' k-th ranges of this name end together while starting apart? Then they end at a
    collective: the long ones are ranks *waiting* for the straggler, not the straggler itself."""
    import numpy as np

    n = min(len(v[1]) for v in per.values())
    t0 = np.stack([v[1][:n] for v in per.values()])
    t1 = np.stack([v[2][:n] for v in per.values()])
    start_spread = float(np.median(t0.max(0) - t0.min(0)))
    end_spread = float(np.median(t1.max(0) - t1.min(0)))
    return end_spread * 2 < start_spread


def stragglers(events: list[ProcessEvents]) -> list[Finding]:
    """The rank whose ranges of one name take longest, by the most time in all."""
    ranks = [(r, pe) for pe in events if (r := _rank(pe.role)) is not None]
    if len(ranks) < 2:
        return []
    med = {r: _per_name(pe) for r, pe in ranks}
    pids = {r: pe.pid for r, pe in ranks}
    best = None
    for name in set.intersection(*(set(m) for m in med.values())):
        per = {r: med[r][name] for r in med}
        slow = max(per, key=lambda r: per[r][0])
        fast = min(per, key=lambda r: per[r][0])
        slow_s, fast_s, count = per[slow][0], per[fast][0], len(per[slow][1])
        gap = slow_s - fast_s
        if fast_s <= 0 or slow_s / fast_s < STRAGGLER_RATIO or gap < MIN_GAP_S or gap * count < MIN_EXCESS_S:
            continue
        if _ends_aligned(per):
            continue
        if best is None or gap * count > best[0]:
            best = (gap * count, name, slow, fast, {r: (v[0], len(v[1])) for r, v in per.items()})
    if best is None:
        return []
    excess, name, slow, fast, counts = best
    lines = [f"rank {r}: median {counts[r][0] * 1e3:.1f} ms over {counts[r][1]} '{name}' ranges"
             for r in sorted(counts)]
    return [Finding(
        "straggler-rank",
        f"rank {slow} is a straggler: its '{name}' ranges take {counts[slow][0] * 1e3:.0f} ms (median) against "
        f"{counts[fast][0] * 1e3:.0f} ms on rank {fast}; the other ranks wait for it at every collective "
        f"(about {excess:.1f} s in all)",
        "look at what differs on that rank: its data (uneven shards or sample sizes), its CPU or GPU "
        "(shared with another job, throttled), its data loading (num_workers) or extra work (logging, "
        "checkpointing on rank 0)",
        Severity.WARNING, (pids[slow],),
        evidence({"slow rank": slow, "slow median ms": round(counts[slow][0] * 1e3, 2),
                  "fast median ms": round(counts[fast][0] * 1e3, 2),
                  "ratio": round(counts[slow][0] / counts[fast][0], 2),
                  "excess s": round(excess, 3)}, lines, [pids[slow]]))]


# -- a collective one rank never joins (live, from the stacks) ----------------------------------------

def _waits(proc) -> tuple[str, str] | None:
    """(what it waits in, the user's line that called it) if a thread of ``proc`` is in a collective."""
    for thread in proc.threads:
        for i, f in enumerate(thread.frames):
            in_dist = "/torch/distributed/" in f.file and f.function in COLLECTIVES
            in_backward = "/torch/autograd/" in f.file and f.function in BACKWARD
            if in_dist or in_backward:
                caller = next((g for g in thread.frames[i + 1:] if "/torch/" not in g.file), None)
                what = "backward (DDP's gradient all-reduce)" if in_backward else f.function
                return what, caller.short() if caller else f.short()
    return None


def _where(proc) -> str:
    from gpuscope.findings.stacks import user_frame

    main = next((t for t in proc.threads if t.name == "MainThread"), proc.threads[0] if proc.threads else None)
    frame = user_frame(main) if main is not None else None
    return frame.short() if frame is not None else (proc.note or "no stack")


def exited_ranks(run_dir: str | os.PathLike[str]) -> dict[int, tuple[int, int | None]]:
    """rank -> (pid, exit code) of ranks whose event log ends with an exit record."""
    from gpuscope.trace.events import RunEvents

    events = RunEvents(run_dir)
    events.refresh(ranges=False)
    out: dict[int, tuple[int, int | None]] = {}
    for pe in events.processes():
        rank = _rank(str(pe.header.get("role", "")))
        if rank is not None and pe.exit is not None:
            out[rank] = (pe.pid, pe.exit_code)
    return out


def collective_mismatch(processes, exited: dict[int, tuple[int, int | None]] | None = None,
                        seen_ns: int | None = None) -> list[Finding]:
    """Ranks waiting in a collective while another rank is elsewhere or gone: name that rank."""
    ranks = {r: p for p in processes if (r := _rank(p.role)) is not None}
    waiting = {r: w for r, p in ranks.items() if (w := _waits(p)) is not None}
    if not waiting:
        return []
    elsewhere = {r: _where(p) for r, p in ranks.items() if r not in waiting and p.threads}
    gone = {r: v for r, v in (exited or {}).items() if r not in ranks}
    if not elsewhere and not gone:
        return []
    lines = [f"rank {r} (pid {ranks[r].pid}) waits in {w} called from {site}"
             for r, (w, site) in sorted(waiting.items())]
    lines += [f"rank {r} (pid {ranks[r].pid}) is elsewhere: {where}" for r, where in sorted(elsewhere.items())]
    lines += [f"rank {r} (pid {pid}) has exited (code {code})" for r, (pid, code) in sorted(gone.items())]
    kinds = {w for w, _ in waiting.values()}
    backward = any(k.startswith("backward") for k in kinds)
    parts = [f"rank {r} is elsewhere ({where})" for r, where in sorted(elsewhere.items())[:3]]
    parts += [f"rank {r} has exited (code {code})" for r, (_, code) in sorted(gone.items())[:3]]
    wait_ranks = sorted(waiting)
    first_wait, first_site = waiting[wait_ranks[0]]
    title = (f"{'; '.join(parts)} while rank{'s' if len(wait_ranks) > 1 else ''} "
             f"{', '.join(map(str, wait_ranks[:6]))} wait{'' if len(wait_ranks) > 1 else 's'} in {first_wait} "
             f"(called from {first_site}): the job hangs until the collective timeout")
    fix = ("a collective that one rank skips (a branch on the rank, an uneven number of batches per rank: "
           "use DistributedSampler(drop_last=True) or join()); ")
    if backward:
        fix += ("in backward: parameters that got no gradient on one rank: "
                "DistributedDataParallel(model, find_unused_parameters=True); ")
    fix += "a rank that exited early must not leave the others in a collective. Stop the run."
    pids = tuple(sorted([ranks[r].pid for r in elsewhere] + [pid for pid, _ in gone.values()]))
    from gpuscope.fix import StopRun   # loaded with the finding that offers it, not with every run's rules
    return [Finding("rank-not-in-collective", title, fix, Severity.ERROR, pids,
                    evidence({"waiting ranks": len(waiting), "ranks elsewhere": len(elsewhere),
                              "ranks exited": len(gone)}, lines, pids), StopRun(),
                    seen_ns if seen_ns is not None else now_ns(), "live")]


@rule("straggler-rank", inputs=Input.EVENTS, on_stop=OnStop.SAY,
      applies=lambda run: sum(pe.role.startswith("rank ") for pe in run.events) >= 2,
      title="one rank's ranges take longest: the others wait for it in every collective")
def _stragglers(run: RunInputs) -> list[Finding]:
    return stragglers(run.events)


declare("rank-not-in-collective", inputs={Input.STACKS, Input.EVENTS}, phase=Phase.LIVE,
        title="ranks wait in a collective that another rank is not in (or has left)")
