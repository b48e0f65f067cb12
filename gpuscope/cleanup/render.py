"""Plain-text rendering of listings and action results (the CLI prints these)."""

from __future__ import annotations

import gpuscope.cleanup.model as m
from gpuscope.cleanup.evidence import human_bytes, human_s

_HEADINGS = {
    m.KIND_PROCESS: "Processes",
    m.KIND_ZOMBIE: "Zombies",
    m.KIND_SHM: "Shared memory and named semaphores (/dev/shm)",
    m.KIND_GPU_GHOST: "GPU memory without a process here",
}


def _process_lines(ev: m.ProcessEvidence) -> list[str]:
    gpu = f", GPU {human_bytes(ev.gpu_memory_bytes)}" if ev.gpu_memory_bytes else ""
    cpu = f"{ev.cpu_percent:.0f} %" if ev.cpu_percent is not None else "?"
    lines = [
        f"  pid {ev.pid}  user {ev.user}  state {ev.state}  age {human_s(ev.age_s or 0)}"
        f"  CPU {cpu}  RSS {human_bytes(ev.rss_bytes)}{gpu}",
        f"    {ev.cmdline}",
        f"    parent: {ev.parent or ev.ppid}; {ev.last_activity}",
    ]
    if ev.run_id:
        lines.append(f"    run: {ev.run_id} ({ev.run_status})")
    return lines


def _shm_lines(ev: m.ShmEvidence) -> list[str]:
    if ev.semaphore:
        return [f"  {ev.path}  named semaphore  owner {ev.owner}  modified {human_s(ev.modified_s_ago)} ago"]
    return [f"  {ev.path}  owner {ev.owner}  size {human_bytes(ev.size_bytes)}"
            f"  in RAM {human_bytes(ev.allocated_bytes)}  modified {human_s(ev.modified_s_ago)} ago"]


def _suspect_lines(s: m.Suspect) -> list[str]:
    ev = s.evidence
    if isinstance(ev, m.ShmEvidence):
        lines = _shm_lines(ev)
    elif isinstance(ev, m.GpuGhostEvidence):
        lines = [f"  {s.title}: {human_bytes(ev.gpu_memory_bytes)}"]
    elif isinstance(ev, m.ProcessEvidence):
        lines = _process_lines(ev)
    else:
        lines = [f"  {s.title}"]
    lines += [f"    why: {r.text} [{r.code}]" for r in s.reasons]
    if s.actions:
        lines.append(f"    can: {', '.join(s.actions)}" + (f"  (blocked: {s.blocked})" if s.blocked else ""))
    if s.advice and (not s.actions or s.kind == m.KIND_ZOMBIE):
        lines.append(f"    advice: {s.advice}")
    return lines


def render_listing(result: m.ScanResult) -> str:
    out: list[str] = []
    if not result.suspects:
        out.append("No suspects: no leftover processes, zombies, leaked shared memory or semaphores found.")
    for kind, heading in _HEADINGS.items():
        group = [s for s in result.suspects if s.kind == kind]
        if not group:
            continue
        out.append(f"{heading} ({len(group)}):")
        for s in group:
            out += _suspect_lines(s)
        out.append("")
    for note in result.notes:
        out.append(f"note: {note}")
    pids = [str(s.pid) for s in result.suspects if s.actions and s.pid and not s.blocked]
    names = [s.identity.name for s in result.suspects
             if isinstance(s.identity, m.ShmIdentity) and not s.blocked]
    if pids or names:
        cmd = "gpuscope cleanup" + (f" --kill {' '.join(pids)}" if pids else "") \
            + (f" --unlink {' '.join(names)}" if names else "") + " --yes"
        out.append(f"To clean up: {cmd}")
    return "\n".join(out).rstrip() + "\n"


def render_results(results: list[m.ActionResult]) -> str:
    lines = []
    for r in results:
        mark = "ok" if r.ok else r.result
        lines.append(f"[{mark}] {r.action} {r.target}: {r.message}")
    return "\n".join(lines) + ("\n" if lines else "")
