"""A job folder of synthetic node runs, written in gpuscope's own formats (event logs with the
injection's range writer, ``node.json`` as the node recorder writes it): for the merge's tests and
benchmarks/bench_job_merge.py, where the true time of every range is known.

Node ``k`` has its own monotonic clock (another boot time) and a wall clock off by
``offsets[k]`` from node 0's; rank ``r``'s step ``i`` starts at the true time ``T0 + i * PERIOD``
(plus ``r`` µs) and lasts ``STEP`` (``slow[r]`` times that for a straggler).
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuscope.inject.eventlog import pack_ranges

TRUE_WALL = 1_800_000_000_000_000_000     # the true time (node 0's clock) of every node's anchor
T0 = 2_000_000_000                        # first step, ns after the anchor
PERIOD = 4_000
STEP = 1_000
BLOCK = 4096


def true_start(rank: int, step: int) -> int:
    """Node 0's wall-clock time of a rank's step start."""
    return TRUE_WALL + T0 + step * PERIOD + rank * 1_000


def _write_process(events: Path, pid: int, ppid: int, role: str, rank: int | None, mono0: int, wall0: int,
                   steps: int, step_ns: int, rank_offset: int, rate: float = 0.0) -> None:
    header = {"v": 1, "pid": pid, "ppid": ppid, "role": role, "start_method": "default", "rank": rank,
              "forked": False, "anchor_mono_ns": mono0, "anchor_wall_ns": wall0}
    lines = [f"H\t{json.dumps(header)}\n", f"I\t{mono0 + 1}\t{json.dumps({'role': role, 'rank': rank})}\n"]
    if steps:
        lines.append("S\t0\tnvtx\t\ttrain_step\t#3366cc\n")
    end = mono0 + T0 + steps * PERIOD + 1_000_000
    lines.append(f"X\t{end}\t{json.dumps({'exit_code': 0, 'how': 'end'})}\n")
    (events / f"{pid}-{mono0}.log").write_text("".join(lines))
    with open(events / f"{pid}-{mono0}.ranges", "wb") as fh:
        for block in range(0, steps, BLOCK):       # one block per flush, as the injection writes them
            rows = []
            for i in range(block, min(steps, block + BLOCK)):
                if rate:   # the node's clock runs (1 + rate) times as fast as node 0's
                    t = mono0 + round((T0 + i * PERIOD + rank_offset) * (1 + rate))
                    rows.append((t, t + round(step_ns * (1 + rate)), pid, 0, "P"))
                else:
                    t = mono0 + T0 + i * PERIOD + rank_offset
                    rows.append((t, t + step_ns, pid, 0, "P"))
            fh.write(pack_ranges(rows))


def make_job(job_dir: Path, nnodes: int, nproc: int, steps: int, offsets: list[int] | None = None,
             slow: dict[int, float] | None = None, measured: bool = True, job_id: str = "synthetic",
             rates: dict[int, float] | None = None, measured_end: bool = True) -> Path:
    """``nnodes`` node folders of ``nproc`` ranks (global rank = node * nproc + local) with ``steps`` ranges each.

    ``rates[k]``: node k's clock runs ``1 + rate`` times as fast as node 0's (drift); its offset is
    measured at the anchor and, with ``measured_end``, again after the last step."""
    offsets = offsets or [0] * nnodes
    slow = slow or {}
    rates = rates or {}
    for node in range(nnodes):
        folder = job_dir / f"node{node}-host{node}-run{node}"
        events = folder / "events"
        events.mkdir(parents=True)
        mono_anchor = (node + 1) * 10**12 + 12345          # each host booted at another time
        wall_anchor = TRUE_WALL + offsets[node]
        processes = []
        agent = 1000 + node                                  # pids repeat across hosts: 1000+node, then ranks
        _write_process(events, agent, 1, "torchrun agent", None, mono_anchor, wall_anchor, 0, STEP, 0)
        processes.append({"pid": agent, "role": "torchrun agent", "rank": None, "range_names": []})
        for local in range(nproc):
            rank = node * nproc + local
            pid = 2000 + local                               # the same pids on every node
            _write_process(events, pid, agent, f"rank {rank}", rank, mono_anchor, wall_anchor, steps,
                           int(STEP * slow.get(rank, 1.0)), rank * 1_000, rates.get(node, 0.0))
            processes.append({"pid": pid, "role": f"rank {rank}", "rank": rank, "range_names": ["train_step"],
                              "exit_code": 0})
        clock = ({"offset_ns": offsets[node], "residual_ns": 0 if node == 0 else 2_000, "rounds": 16,
                  "reference": "self" if node == 0 else "host0:1", "error": None, "mono_ns": mono_anchor}
                 if measured else
                 {"offset_ns": 0, "residual_ns": None, "rounds": 0, "reference": "", "error": "no answer"})
        clock_end = None
        if measured and node and measured_end:
            rate = rates.get(node, 0.0)
            span = round((T0 + steps * PERIOD + 10**9) * (1 + rate))      # node clock from anchor to the end
            clock_end = dict(clock, offset_ns=offsets[node] + round(span * rate / (1 + rate)),
                             mono_ns=mono_anchor + span)
        meta = {"format": 1, "job_id": job_id, "node_rank": node, "nnodes": nnodes, "nproc": nproc,
                "host": f"host{node}", "run_id": f"run{node}", "exit_code": 0,
                "anchor": {"wall_ns": wall_anchor, "mono_ns": mono_anchor}, "clock": clock, "clock_end": clock_end,
                "processes": processes}
        (folder / "node.json").write_text(json.dumps(meta))
    return job_dir
