"""``gpuscope compare``: two runs side by side (fork vs spawn, before vs after)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from gpuscope.errors import UserError



def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", help="run id (or unique prefix), e.g. the fork run")
    p.add_argument("run_b", help="run id (or unique prefix), e.g. the spawn run")
    p.add_argument("--json", action="store_true")
    p.add_argument("--top", type=int, default=15, help="range names to show")


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}{unit}"
    return f"{value:,}{unit}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def run(args: argparse.Namespace) -> int:
    from gpuscope.analysis.comparison import figures, range_rows, ratio
    from gpuscope.store import db
    from gpuscope.store import runs as store_runs

    loaded = []
    with db.connect() as conn:
        for run_id in (args.run_a, args.run_b):
            row = store_runs.get_run(conn, run_id)
            if row is None:
                raise UserError(f"no run {run_id!r} in the store (see `gpuscope history`)")
            label = row.start_method if row.launcher == "python" else f"torchrun×{row.spec.get('nproc')}"
            loaded.append(figures(row.id, row.run_dir, row.summary, label))
    a, b = loaded
    rows = range_rows(a, b)
    if args.json:
        print(json.dumps({"a": asdict(a), "b": asdict(b), "ranges": rows}, default=lambda o: asdict(o)))
        return 0
    lines = [f"{'':<28} {'A: ' + a.label:>22} {'B: ' + b.label:>22} {'B/A':>8}",
             f"{'run':<28} {a.run_id:>22} {b.run_id:>22}"]
    for title, va, vb, unit in (
        ("wall time", a.duration_s, b.duration_s, " s"),
        ("child start-up (median)", a.child_startup_ms, b.child_startup_ms, " ms"),
        ("  gpuscope's share (median)", a.hook_ms, b.hook_ms, " ms"),
        ("child start → first range", a.first_task_ms, b.first_task_ms, " ms"),
        ("CPU time, all processes", a.cpu_seconds, b.cpu_seconds, " s"),
        ("peak RSS, summed", a.peak_rss_bytes and a.peak_rss_bytes / 2**20,
         b.peak_rss_bytes and b.peak_rss_bytes / 2**20, " MiB"),
    ):
        lines.append(f"{title:<28} {_fmt(va, unit):>22} {_fmt(vb, unit):>22} {_ratio(ratio(va, vb)):>8}")
    for fig in (a, b):
        if fig.sampled:
            lines.append(f"run {fig.run_id}: {' and '.join(fig.sampled)} of some processes sampled at 10 Hz "
                         "(not measured by the process itself); the rest exact")
    roles = sorted(set(a.processes) | set(b.processes))
    lines.append("processes: " + ", ".join(f"{r} {a.processes.get(r, 0)}→{b.processes.get(r, 0)}" for r in roles))
    lines.append("")
    lines.append(f"{'range':<34} {'A count':>8} {'A total ms':>11} {'B count':>8} {'B total ms':>11} {'B/A':>7}")
    for r in rows[: args.top]:
        lines.append(f"{r['name'][:34]:<34} {r['a_count']:>8} {r['a_total_ns'] / 1e6:>11.2f} "
                     f"{r['b_count']:>8} {r['b_total_ns'] / 1e6:>11.2f} {_ratio(r['ratio']):>7}")
    print("\n".join(lines))
    return 0
