"""What a run's processes did, from their event logs: the per-process rows of the run summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuscope.trace.events import ProcessEvents, read_run_events


def process_row(pe: ProcessEvents) -> dict[str, Any]:
    ended = pe.end_ns
    if ended is None and len(pe.ranges):
        ended = int(pe.ranges["t1"].max())
    exit_info = pe.exit or {}
    return {
        "pid": pe.pid,
        "ppid": pe.ppid,
        "role": pe.role,
        "start_method": pe.start_method,
        "rank": pe.rank,
        "name": pe.info.get("os_name"),
        "mp_name": pe.info.get("mp_name"),
        "exit_code": exit_info.get("exit_code"),
        "clean_exit": pe.exit is not None,
        "started_ns": pe.wall_ns(pe.start_ns),
        "ended_ns": pe.wall_ns(ended) if ended is not None else None,
        "lifetime_s": round((ended - pe.start_ns) / 1e9, 3) if ended is not None else None,
        "ranges": int(len(pe.ranges)),
        "marks": len(pe.marks),
        "range_names": pe.range_names(),
        "top_ranges": [{"name": n, "count": c, "total_ns": t} for n, c, t in pe.top_ranges(3)],
        "injection_errors": len(pe.errors),
        "log_truncated": pe.truncated,
        "info": {k: pe.info.get(k) for k in ("argv", "nvtx", "forked", "parent_role", "local_rank",
                                              "start_method_explicit", "executable") if pe.info.get(k) is not None},
    }


def collect_processes(run_dir: Path, root_role: str = "main", root_exit: int | None = None) -> list[dict[str, Any]]:
    """Rows for every logged process; the launched program's exit code goes to ``root_role``."""
    rows = [process_row(pe) for pe in read_run_events(run_dir)]
    for row in rows:
        if row["role"] == root_role and row["exit_code"] is None:
            row["exit_code"] = root_exit
    return rows


def merge_telemetry(rows: list[dict[str, Any]], seen: dict[int, dict[str, Any]]) -> None:
    """Add the sampler's per-process figures; processes it saw without a log get a row too."""
    logged = {row["pid"] for row in rows}
    for row in rows:
        t = seen.get(row["pid"])
        if t is not None:
            row["cpu_seconds"] = round(t["cpu_seconds"], 3)
            row["peak_rss_bytes"] = t["peak_rss_bytes"]
            row["peak_gpu_mem_bytes"] = t["peak_gpu_mem_bytes"]
            row["info"]["create_time"] = t["create_time"]
        else:
            row.update(cpu_seconds=None, peak_rss_bytes=None, peak_gpu_mem_bytes=None)
    for pid, t in sorted(seen.items()):
        if pid in logged:
            continue
        # A process gpuscope could not inject: not Python, isolated (-I/-E/-S), or nsys itself.
        rows.append({
            "pid": pid, "ppid": t.get("ppid"), "role": "not injected", "start_method": None, "rank": None,
            "name": t.get("name"), "mp_name": None, "exit_code": None, "clean_exit": None,
            "started_ns": None, "ended_ns": None, "lifetime_s": None, "ranges": 0, "marks": 0,
            "range_names": [], "top_ranges": [], "injection_errors": 0, "log_truncated": False,
            "cpu_seconds": round(t["cpu_seconds"], 3), "peak_rss_bytes": t["peak_rss_bytes"],
            "peak_gpu_mem_bytes": t["peak_gpu_mem_bytes"],
            "info": {"cmdline": t.get("cmdline"), "create_time": t.get("create_time")},
        })
