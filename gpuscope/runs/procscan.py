"""Find the processes of a run through /proc: session members and processes carrying the run id.

Stdlib only (the supervisor must work before telemetry is loaded). Zombies count as gone: they
hold no memory and cannot be signalled away (PID 1 may never reap them in a container).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_ticks: int
    comm: str


def read_stat(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    lpar, rpar = data.find("("), data.rfind(")")
    fields = data[rpar + 2:].split()
    try:
        return ProcInfo(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), sid=int(fields[3]),
                        state=fields[0], start_ticks=int(fields[19]), comm=data[lpar + 1:rpar])
    except (IndexError, ValueError):
        return None


def all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def has_run_tag(pid: int, run_id: str) -> bool:
    """Whether the process's environment carries GPUSCOPE_RUN_ID=<run_id>."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return False
    return f"GPUSCOPE_RUN_ID={run_id}".encode() in env.split(b"\0")


def run_processes(session_id: int, run_id: str, exclude: set[int] | None = None) -> dict[int, ProcInfo]:
    """Live (non-zombie) processes in the run's session or tagged with its id."""
    exclude = exclude or set()
    me = os.getpid()
    found: dict[int, ProcInfo] = {}
    for pid in all_pids():
        if pid == me or pid in exclude:
            continue
        info = read_stat(pid)
        if info is None or info.state in ("Z", "X"):
            continue
        if info.sid == session_id or has_run_tag(pid, run_id):
            found[pid] = info
    return found


def alive(pid: int) -> bool:
    info = read_stat(pid)
    return info is not None and info.state not in ("Z", "X")
