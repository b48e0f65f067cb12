"""Turning observations into suspects with reasons (used by :mod:`gpuscope.cleanup.scanner`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import gpuscope.cleanup.model as m
from gpuscope.cleanup.evidence import human_bytes, human_s, process_evidence, short_cmd
from gpuscope.cleanup.gpu_holders import IdleVerdict
from gpuscope.cleanup.patterns import REAPING_INITS, reparented, resource_tracked, worker_kind
from gpuscope.cleanup.runlink import RunLink
from gpuscope.cleanup.safety import listing_refusal, owner_refusal
from gpuscope.cleanup.shm import leaked_segments, segment_evidence
from gpuscope.cleanup.shm_runs import attribute
from gpuscope.cleanup.snapshot import ProcInfo, ProcTable, nvidia_files_open, user_name
from gpuscope.nsys.agents import stale_reason
from gpuscope.procs.namespace import in_host_pid_namespace

if TYPE_CHECKING:
    from gpuscope.cleanup.scanner import Scanner


def _idle_text(v: IdleVerdict) -> str:
    util = "SM utilisation" if v.per_process else \
        "device utilisation (NVML gives no per-process numbers here)"
    devs = ", ".join(str(d) for d in v.devices)
    return (f"holds {human_bytes(v.memory)} of GPU memory on GPU {devs} with 0 % {util} "
            f"for {human_s(v.idle_s)} while sleeping ({v.cpu_share * 100:.1f} % CPU)")


def process_reasons(scanner: "Scanner", proc: ProcInfo, table: ProcTable, now: float,
                    link: RunLink | None, verdict: IdleVerdict | None) -> list[m.Reason]:
    """Every reason a live (non-zombie) process is suspected."""
    reasons = []
    if verdict is not None:
        reasons.append(m.Reason(m.IDLE_GPU, _idle_text(verdict)))
    if link is not None:
        reasons.append(m.Reason(m.RUN_LEFTOVER, link.text(now)))
    kind = worker_kind(proc)
    why = _orphan_why(proc, table) if kind else None
    if kind and why:
        reasons.append(m.Reason(m.ORPHAN_WORKER, f"orphaned {kind}: {why}"))
    stale = stale_reason(proc, table.procs)
    if stale:
        share = scanner.cpu_share(proc)
        if share is not None:
            stale += f"; it still uses {share * 100:.0f} % of a core"
        reasons.append(m.Reason(m.STALE_NSYS_AGENT, stale))
    return reasons


def _orphan_why(proc: ProcInfo, table: ProcTable) -> str | None:
    """Why a worker is orphaned: it was re-parented, or it is the child of a forkserver that was."""
    why = reparented(proc, table)
    if why:
        return why
    parent = table.get(proc.ppid)
    if parent is not None and "forkserver" in (worker_kind(parent) or "") \
            and reparented(parent, table):
        return f"its forkserver (pid {parent.pid}) is orphaned: the program that started both is gone"
    return None


def _pid1_reaps(table: ProcTable) -> bool:
    init = table.get(1)
    return init is not None and init.name in REAPING_INITS


def zombie_suspect(scanner: "Scanner", proc: ProcInfo, table: ProcTable, now: float) -> m.Suspect:
    """A zombie, with the parent that should reap it — or advice when that parent is PID 1."""
    parent = table.get(proc.ppid)
    pname = parent.name if parent else "?"
    ev = process_evidence(proc, table, None, None, now)
    ev.parent_cmdline = parent.cmd if parent else None
    ev.zombie_seen_s = round(scanner.zombie_seen_s(proc), 1)
    s = m.Suspect(key=f"pid:{proc.pid}", kind=m.KIND_ZOMBIE,
                  title=f"zombie {proc.name} (pid {proc.pid}), parent {pname} (pid {proc.ppid})",
                  evidence=ev, identity=m.ProcIdentity(proc.pid, proc.create_time))
    if proc.ppid == 1:
        seen = ev.zombie_seen_s
        s.add_reason(m.ZOMBIE, f"zombie (exited, never reaped); its parent is PID 1 ({pname}), "
                               f"which does not reap adopted children"
                               + (f" (still unreaped after {seen:g} s)" if seen > 0 else ""))
        s.blocked = f"no action can remove it: PID 1 ({pname}) does not reap zombies"
        s.advice = (f"A signal cannot remove a zombie, and PID 1 ({pname}) is not an init that reaps "
                    "orphans. Start the container with an init (docker run --init, or tini/dumb-init "
                    "as PID 1). The zombie holds no memory, only a process-table slot.")
        return s
    s.add_reason(m.ZOMBIE, f"zombie (exited, not reaped): waiting for its parent {pname} "
                           f"(pid {proc.ppid}) to reap it")
    s.actions = [m.SIGNAL_PARENT]
    if parent is not None and parent.pid != os.getpid():
        s.blocked = listing_refusal(parent, scanner.policy)
    after = "its init reaps it" if _pid1_reaps(table) else \
        "it is adopted by PID 1 — which here does not reap, so it stays a zombie"
    s.advice = (f"Signalling the parent (SIGCHLD) helps when it reaps on SIGCHLD. Otherwise terminate "
                f"the parent (pid {proc.ppid}); {after}.")
    return s


def add_gpu_ghosts(scanner: "Scanner", table: ProcTable, suspects: dict[str, m.Suspect]) -> None:
    """GPU memory accounted to a pid that does not exist here (or is not a GPU user here)."""
    for pid, hold in scanner.holdings.items():
        proc = table.get(pid)
        devs = ", ".join(str(d) for d in hold.devices)
        amount = human_bytes(hold.memory) if hold.memory > 0 else "memory (amount not available)"
        base = f"GPU {devs} reports {amount} held by pid {pid}"
        if proc is None and in_host_pid_namespace() is False:
            reason = m.Reason(m.GPU_DEAD_PID, f"{base} (a host pid), not visible in this container's PID "
                                              "namespace: its memory is shown here, its process is not")
        elif proc is None:
            reason = m.Reason(m.GPU_DEAD_PID, f"{base}, which does not exist here")
        elif scanner.verify_gpu_pids and not proc.is_zombie and nvidia_files_open(pid) is False:
            reason = m.Reason(m.GPU_PID_MISMATCH, f"{base}, but pid {pid} here ({short_cmd(proc, 60)}) "
                                                  "has no /dev/nvidia* device open")
        else:
            continue
        suspects[f"gpu:{pid}"] = m.Suspect(
            key=f"gpu:{pid}", kind=m.KIND_GPU_GHOST, title=f"GPU memory of pid {pid}",
            reasons=[reason], evidence=m.GpuGhostEvidence(pid, hold.memory, list(hold.devices)),
            blocked="no process here to signal",
            advice=("NVML reports pids of the host's PID namespace: in a container run gpuscope with "
                    "--pid=host, or find the holder on the host with `fuser -v /dev/nvidia*`. If the "
                    "process is exiting, the driver frees the memory when its context is torn down."))


def add_shm_suspects(scanner: "Scanner", table: ProcTable, suspects: dict[str, m.Suspect],
                     notes: list[str], now: float) -> None:
    """Segments and named semaphores in /dev/shm that no live process maps or keeps open."""
    leaked, usage, young = leaked_segments(scanner.shm_dir, scanner.shm_min_age_s, now)
    trackers = [p for p in table if not p.is_zombie
                and "multiprocessing.resource_tracker import main" in " ".join(p.cmdline)]
    made_by = attribute(scanner.conn, leaked) if scanner.conn is not None else {}
    for seg in leaked:
        ev = segment_evidence(seg, now)
        if seg.is_semaphore:
            code = m.LEAKED_SEM
            text = (f"{ev.creator}: owned by {user_name(seg.uid)}, not mapped or open by any process (nothing "
                    f"can wait on it or post it now), last modified {human_s(now - seg.mtime)} ago")
        else:
            code = m.LEAKED_SHM
            text = (f"{ev.creator or 'shared memory segment'}: {human_bytes(seg.allocated)} in RAM "
                    f"(size {human_bytes(seg.size)}), owned by {user_name(seg.uid)}, not mapped or open by any "
                    f"process, last modified {human_s(now - seg.mtime)} ago")
        if seg.name in made_by:
            run_id, made = made_by[seg.name]
            ev.run_id, ev.creator_pid, ev.created_at = run_id, made.pid, made.where or None
            text += (f"; made by gpuscope run {run_id} (pid {made.pid}"
                     + (f", {made.where}" if made.where else "") + ") and never unlinked")
        mine = [p.pid for p in trackers if p.uid == seg.uid]
        if resource_tracked(seg.name) and mine:
            ev.resource_trackers = mine
            text += f" (a live multiprocessing resource tracker, pid {mine[0]}, may still unlink it)"
        suspects[f"shm:{seg.name}"] = m.Suspect(
            key=f"shm:{seg.name}", kind=m.KIND_SHM, title=f"/dev/shm/{seg.name}",
            reasons=[m.Reason(code, text)], evidence=ev,
            identity=m.ShmIdentity(seg.name, seg.dev, seg.ino), actions=[m.UNLINK],
            blocked=owner_refusal(seg.uid, f"/dev/shm/{seg.name}", scanner.policy))
    if usage.unreadable:
        names = [f"{pid} ({p.name})" if (p := table.get(pid)) else str(pid) for pid in usage.unreadable[:5]]
        more = f" and {len(usage.unreadable) - 5} more" if len(usage.unreadable) > 5 else ""
        notes.append(f"could not read the memory maps of pid {', '.join(names)}{more} (not "
                     "permitted); a segment only they use would be listed as leaked")
    if young:
        notes.append(young_note(len(young), scanner.shm_min_age_s, scanner.shm_dir))


def young_note(count: int, min_age_s: float, shm_dir: str = "/dev/shm") -> str:
    """The note for unused files of ``shm_dir`` held back because they are younger than the threshold."""
    return (f"{count} unused file(s) in {shm_dir} younger than {min_age_s:g} s are not judged yet "
            "(their creator may be about to map them); they are listed once they are older")
