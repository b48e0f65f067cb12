"""Evidence for suspects: the numbers a user needs to decide (typed; ``to_dict()`` for JSON)."""

from __future__ import annotations

import time

from gpuscope.cleanup.gpu_holders import GpuHolding
from gpuscope.cleanup.model import ProcessEvidence
from gpuscope.cleanup.snapshot import ProcInfo, ProcTable, last_ran_s_ago, user_name


def short_cmd(proc: ProcInfo, width: int = 90) -> str:
    cmd = proc.cmd
    return cmd if len(cmd) <= width else cmd[: width - 1] + "…"


def _round(value: float | None, nd: int = 1) -> float | None:
    return None if value is None else round(value, nd)


def process_evidence(proc: ProcInfo, table: ProcTable, cpu_share: float | None,
                     hold: GpuHolding | None, now: float | None = None) -> ProcessEvidence:
    """pid, user, command, age, state, CPU, memory, GPU memory, last activity, parent."""
    now = time.time() if now is None else now
    parent = table.get(proc.ppid)
    last_ran = None if proc.is_zombie else last_ran_s_ago(proc.pid)
    return ProcessEvidence(
        pid=proc.pid, ppid=proc.ppid, parent=f"{parent.name} (pid {parent.pid})" if parent else None,
        user=user_name(proc.uid), uid=proc.uid, name=proc.name, cmdline=proc.cmd,
        create_time=proc.create_time, age_s=_round(now - proc.create_time), state=proc.status,
        session=proc.sid, threads=proc.threads,
        cpu_percent=_round(None if cpu_share is None else cpu_share * 100.0),
        cpu_time_s=round(proc.cpu_time, 2), rss_bytes=proc.rss,
        gpu_memory_bytes=hold.memory if hold else None, gpu_devices=list(hold.devices) if hold else [],
        last_ran_s_ago=_round(last_ran), last_activity=_activity_text(last_ran, proc))


def _activity_text(last_ran: float | None, proc: ProcInfo) -> str:
    if proc.is_zombie:
        return "exited (zombie)"
    if last_ran is None:
        return f"{proc.cpu_time:.2f} s of CPU time in total"
    return f"last ran on a CPU {human_s(last_ran)} ago; {proc.cpu_time:.2f} s of CPU time in total"


def human_s(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
