"""Findings an attached tree shows without injection: from its samples, its stacks and ``/proc``.

- ``looks-stuck``: no process of the tree used CPU for ``stuck_after_s`` and two stack reads in
  that time are the same for every process;
- ``rank-not-in-collective``: the stacks show ranks waiting in a collective another rank is not in
  (the rule of :mod:`gpuscope.findings.ddp_rules`, on stacks read from outside);
- ``left-running``: the root has ended and processes of the tree still run; ``orphaned-worker``:
  a worker whose parent ended while the root still runs;
- ``zombie``: a process ended and its parent has not waited for it, seen on two samples;
- ``oom-kill``: the tree's memory cgroup counted an OOM kill since attaching;
- ``memory-pressure``: the host's memory nearly all used while attached;
- ``leaked-shm``: once the tree has ended, a ``/dev/shm`` file one of its processes mapped or held
  open (seen by the session's scans of their maps) is still there and nobody uses it;
- the telemetry rules of :class:`gpuscope.findings.telemetry_rules.TelemetryWatch` on the tree's
  samples (``idle-gpu-memory``, ``cuda-contexts``, ``input-bound``, ``cow-lost``).

The codes are declared in ``gpuscope/findings/attach_rules.py`` (``gpuscope findings --rules``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuscope.finding import Finding, Severity, evidence, now_ns
from gpuscope.findings.telemetry_rules import TelemetryWatch

if TYPE_CHECKING:
    from gpuscope.attach.stacks import TreeStacks
    from gpuscope.attach.view import AttachedProcess
    from gpuscope.telemetry.batch import SampleBatch

IDLE_CPU = 0.02             # CPU seconds per second of the whole tree below which it does nothing
MEMORY_PRESSURE = 0.95      # share of the host's memory in use


def wakeups(pid: int) -> int | None:
    """Context switches of the process's main thread so far: a process blocked for good has none
    more, one that sleeps in a loop (a poll, time.sleep between tasks) keeps adding them."""
    from gpuscope.procs.read import status_fields

    fields = status_fields(pid)
    try:
        return int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    except (KeyError, ValueError):
        return None


def stack_key(stacks: TreeStacks) -> dict[int, tuple]:
    """pid -> what its threads' stacks are and its main thread's wake-ups (to compare two reads)."""
    return {p.pid: (wakeups(p.pid),
                    tuple(sorted((t.name, tuple((f.function, f.file, f.line) for f in t.frames)) for t in p.threads)))
            for p in stacks.processes if p.threads or p.source != "none" or "not a Python" not in p.note}


@dataclass
class Watch:
    """What the checks remember between samples (owned by the session, under its lock)."""

    root_pid: int
    stuck_after_s: float = 10.0
    oom_path: str | None = None
    oom_start: int | None = None
    _cpu_total: float | None = None
    _busy_at: float = 0.0                                  # monotonic s: last time the tree used CPU
    _last_t: float = 0.0
    _stacks: list[tuple[float, dict[int, tuple]]] = field(default_factory=list)
    _zombie_seen: dict[int, int] = field(default_factory=dict)
    telemetry: TelemetryWatch = field(default_factory=TelemetryWatch)
    shm_refs: dict[str, int] = field(default_factory=dict)      # /dev/shm path -> a pid that used it
    _max_mem_share: float = 0.0
    _oom_now: int | None = None

    def start(self) -> None:
        from gpuscope.findings.process_rules import memory_events_path, oom_kills
        from gpuscope.procs.files import pid_path

        self.oom_path = memory_events_path(pid_path(self.root_pid, "cgroup"))
        self.oom_start = oom_kills(self.oom_path) if self.oom_path else None

    def observe(self, t: float, procs: list[AttachedProcess], batch: SampleBatch | None = None) -> None:
        """One sample of the tree at monotonic time ``t`` (seconds)."""
        live = [p for p in procs if p.alive and p.state != "zombie"]
        total = sum(p.cpu_s for p in live)
        if self._cpu_total is None or not self._last_t:
            self._busy_at = t
        elif total - self._cpu_total > IDLE_CPU * max(t - self._last_t, 1e-3) or total < self._cpu_total:
            self._busy_at = t
        self._cpu_total, self._last_t = total, t
        for p in procs:
            self._zombie_seen[p.pid] = self._zombie_seen.get(p.pid, 0) + 1 if p.state == "zombie" else 0
        if batch is not None:
            self._take_batch(t, batch)

    def _take_batch(self, t: float, batch: SampleBatch) -> None:
        host = batch.host
        if host is not None and host.mem_total:
            self._max_mem_share = max(self._max_mem_share, host.mem_used / host.mem_total)
        self.telemetry.add(batch)

    def note_shm(self, pids: list[int]) -> None:
        """The /dev/shm files the tree's live processes map now."""
        from gpuscope.procs.shm import refs_of

        for pid in pids:
            for path in refs_of(pid, fds=False):     # a segment in use is mapped
                self.shm_refs.setdefault(path, pid)

    def _leaked_shm(self, procs: list[AttachedProcess]) -> list[Finding]:
        """Once nothing of the tree runs: what it used and nobody removed or uses."""
        if not self.shm_refs or any(p.alive and p.state != "zombie" for p in procs):
            return []
        from gpuscope.fix import CleanupShm
        from gpuscope.procs.shm import users_of

        left = sorted(p for p in self.shm_refs if os.path.exists(p) and not users_of(p))[:16]
        if not left:
            return []
        size = sum(os.path.getsize(p) for p in left if os.path.exists(p))
        lines = [f"{p} ({os.path.getsize(p)} bytes), used by pid {self.shm_refs[p]}" for p in left]
        return [Finding("leaked-shm", f"{len(left)} shared memory file(s) the job used are still in /dev/shm after "
                        f"it ended ({size} bytes): they hold RAM until someone removes them",
                        "unlink() each segment once in the process that created it (or use SharedMemoryManager); "
                        "gpuscope cleanup can remove them", Severity.WARNING,
                        tuple(sorted({self.shm_refs[p] for p in left})),
                        evidence({"files": len(left), "bytes": size}, lines),
                        CleanupShm(tuple(os.path.basename(p) for p in left)), now_ns(), "live")]

    def stacks_read(self, t: float, stacks: TreeStacks) -> None:
        self._stacks = [*self._stacks[-7:], (t, stack_key(stacks))]

    def idle_s(self, t: float) -> float:
        return t - self._busy_at if self._last_t else 0.0

    def looks_stuck(self, t: float) -> bool:
        """Idle for ``stuck_after_s``, and the last stack read the same as one half of that earlier
        (both while idle)."""
        if self.idle_s(t) < self.stuck_after_s or len(self._stacks) < 2:
            return False
        t2, b = self._stacks[-1]
        # the earlier read far enough back that a process sleeping in a loop has woken up in between
        earlier = [(t1, a) for t1, a in self._stacks[:-1] if t2 - t1 >= max(0.5, self.stuck_after_s / 2)]
        if not earlier:
            return False
        t1, a = earlier[-1]
        unread = any(not threads for _, threads in a.values())    # a torn or refused read proves nothing
        return t1 >= self._busy_at and bool(a) and not unread and a == b

    def findings(self, t: float, procs: list[AttachedProcess], stacks: TreeStacks | None,
                 root_alive: bool) -> list[Finding]:
        out: list[Finding] = []
        if stacks is not None and self.looks_stuck(t):
            out.append(_stuck(self.idle_s(t), stacks))
        if stacks is not None:
            from gpuscope.findings.ddp_rules import collective_mismatch

            out += collective_mismatch(stacks.processes)
        out += _left(procs, root_alive, self.root_pid)
        zombies = [p for p in procs if self._zombie_seen.get(p.pid, 0) >= 2]
        if zombies:
            out.append(Finding("zombie", f"{len(zombies)} process(es) ended but their parent has not waited for "
                               "them (zombies)", "the parent must join()/wait() its children (Process.join, "
                               "Pool.close + join, Popen.wait)", Severity.WARNING, tuple(p.pid for p in zombies),
                               evidence({"zombies": len(zombies)},
                                        [f"pid {p.pid} ({p.role}), parent {p.ppid}" for p in zombies]),
                               first_seen_ns=now_ns(), source="live"))
        out += self._oom()
        out += self._leaked_shm(procs)
        if self._max_mem_share >= MEMORY_PRESSURE:
            out.append(Finding("memory-pressure", f"the host's memory was {self._max_mem_share:.0%} used while "
                               "attached: the job risks the OOM killer or swapping", "fewer or smaller workers, "
                               "or a machine with more memory", Severity.WARNING,
                               evidence=evidence({"max memory used %": round(100 * self._max_mem_share, 1)}),
                               first_seen_ns=now_ns(), source="live"))
        forked = {p.pid for p in procs if p.start_method == "fork" and p.alive}
        roles = {p.pid: p.role for p in procs}
        self.telemetry.read_uss(forked, time.monotonic_ns())
        out += self.telemetry.findings(forked, roles, time.monotonic_ns())
        return out

    def _oom(self) -> list[Finding]:
        from gpuscope.findings.process_rules import oom_kills

        now = oom_kills(self.oom_path) if self.oom_path else None
        if now is None or self.oom_start is None or now <= self.oom_start:
            return []
        n = now - self.oom_start
        return [Finding("oom-kill", f"the kernel's OOM killer ended {n} process(es) of the job's memory cgroup "
                        "while attached", "lower the memory use per process (fewer workers, smaller batches) "
                        "or raise the job's memory limit", Severity.ERROR,
                        evidence=evidence({"oom kills": n}, [self.oom_path or ""]),
                        first_seen_ns=now_ns(), source="live")]


def _stuck(idle_s: float, stacks: TreeStacks) -> Finding:
    from gpuscope.findings.stacks import group

    lines = group(stacks.processes)
    pids = tuple(p.pid for p in stacks.processes if p.threads)
    return Finding("looks-stuck", f"the job looks stuck: no process used CPU for {idle_s:.0f} s and their stacks "
                   "did not change between two reads", "see where each process waits (the stacks below): a lock "
                   "held at fork time, a queue nobody fills, a collective another rank never joins",
                   Severity.ERROR, pids, evidence({"idle s": round(idle_s, 1)}, lines[:20], pids),
                   first_seen_ns=now_ns(), source="live")


def _left(procs: list[AttachedProcess], root_alive: bool, root_pid: int) -> list[Finding]:
    live = [p for p in procs if p.alive and p.state != "zombie" and p.pid != root_pid]
    if not root_alive and live:
        return [Finding("left-running", f"the job's first process ended but {len(live)} of its processes still "
                        "run", "end them (gpuscope cleanup) and make the parent join its workers before it exits",
                        Severity.WARNING, tuple(p.pid for p in live),
                        evidence({"left running": len(live)}, [f"pid {p.pid} ({p.role})" for p in live]),
                        first_seen_ns=now_ns(), source="live")]
    alive = {p.pid for p in procs if p.alive}
    orphans = [p for p in live if p.ppid not in alive and p.ppid != os.getpid()]
    if root_alive and orphans:
        return [Finding("orphaned-worker", f"{len(orphans)} process(es) of the job lost their parent and still "
                        "run", "a worker's parent ended without ending it: end them (gpuscope cleanup)",
                        Severity.WARNING, tuple(p.pid for p in orphans),
                        evidence({"orphaned": len(orphans)},
                                 [f"pid {p.pid} ({p.role}), parent now {p.ppid}" for p in orphans]),
                        first_seen_ns=now_ns(), source="live")]
    return []
