"""Rules on the sampler's batches (live): copy-on-write lost in fork children, and on a GPU an
input-bound job, several CUDA contexts on one GPU, and processes holding GPU memory while idle.

:class:`TelemetryWatch` takes every :class:`~gpuscope.telemetry.batch.SampleBatch` in
:meth:`~TelemetryWatch.add` (O(processes) dictionary updates: a tick's budget is in README's
benchmark table) and :meth:`~TelemetryWatch.findings` evaluates the rules on what it kept (on the
findings recorder's watchdog thread, and at the end of the run).

- ``cow-lost``: a fork child's USS (the memory only it holds; ~0 at the fork) reached ``COW_SHARE`` of
  its parent's RSS while the part of its RSS it still shares fell by as much, the parent holding
  >= ``COW_MIN_PARENT``: the pages it inherited were copied (memory a child allocates itself adds
  to its USS but leaves the shared part alone). Reading Python objects writes their reference
  counts (and the cyclic GC writes its headers), so a worker that only reads a big inherited list
  or dict copies it. USS comes from the samples where the sampler reads it, else
  :meth:`TelemetryWatch.read_uss` reads it for the fork children of big parents only.
- ``input-bound``: the GPU a process uses is < ``IDLE_UTIL`` % busy while at least half of the
  children of that process (DataLoader workers; an idle helper such as the resource tracker is
  not) each use >= ``BUSY_CPU`` % of a core, for >= ``INPUT_SHARE`` of >= ``MIN_WINDOW_S`` of ticks.
- ``cuda-contexts``: several processes of the run hold memory on one GPU (each CUDA context costs
  hundreds of MiB before any tensor).
- ``idle-gpu-memory``: a process holds >= ``IDLE_MEM`` of GPU memory while it (or, where the driver
  gives no per-process utilisation, its GPU) has been idle for >= ``IDLE_S``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuscope.finding import Finding, Severity, evidence, now_ns
from gpuscope.findings.registry import Input, Phase, declare

MIB = 1 << 20
COW_MIN_PARENT = 100 * MIB
COW_SHARE = 0.5
IDLE_UTIL = 30.0
BUSY_CPU = 80.0
MIN_WINDOW_S = 5.0
INPUT_SHARE = 0.6
IDLE_MEM = 256 * MIB
IDLE_S = 10.0
CONTEXT_TICKS = 3


@dataclass
class _Proc:
    """One process's memory and GPU state as the ticks saw it."""

    ppid: int
    rss: int = 0
    rss_max: int = 0
    uss_first: int | None = None
    uss_max: int = 0
    shared_min: int | None = None        # RSS - USS: the pages it still shares
    gpu_mem: int = 0
    idle_since_ns: int | None = None     # GPU memory held and idle since (monotonic ns)
    first_ns: int = 0

    def note_uss(self, uss: int) -> None:
        if self.uss_first is None:
            self.uss_first = uss
        if uss > self.uss_max:
            self.uss_max = uss
        shared = max(0, self.rss - uss)
        if self.shared_min is None or shared < self.shared_min:
            self.shared_min = shared


@dataclass
class TelemetryWatch:
    """The telemetry rules' state over the run's ticks."""

    procs: dict[int, _Proc] = field(default_factory=dict)
    input_ticks: int = 0                 # ticks with a GPU process that has children
    input_bound_ticks: int = 0
    input_first_ns: int | None = None
    input_last_ns: int = 0
    input_example: tuple = ()
    contexts: dict[int, dict[int, int]] = field(default_factory=dict)   # device -> pid -> memory (latest)
    context_ticks: dict[int, int] = field(default_factory=dict)        # device -> ticks with >= 2 holders
    first_seen: dict[str, int] = field(default_factory=dict)           # code -> wall ns
    last_ns: int = 0                                                    # the last tick's monotonic ns
    alive: frozenset[int] = frozenset()                                 # pids of the last tick
    uss_read_ns: dict[int, int] = field(default_factory=dict)          # pid -> when we read its USS

    def add(self, batch) -> None:
        """One tick: what the rules need, nothing more."""
        procs = self.procs
        t = batch.t_ns
        children: dict[int, list[float]] = {}
        for p in batch.processes:
            st = procs.get(p.pid)
            if st is None:
                st = procs[p.pid] = _Proc(p.ppid, first_ns=t)
            st.rss = p.rss
            if p.rss > st.rss_max:
                st.rss_max = p.rss
            if p.uss is not None:
                st.note_uss(p.uss)
            children.setdefault(p.ppid, []).append(p.cpu or 0.0)
        self.last_ns = t
        self.alive = frozenset(p.pid for p in batch.processes)
        if not batch.gpu_processes:
            return
        util = {d.index: d.util_gpu for d in batch.devices}
        by_dev: dict[int, dict[int, int]] = {}
        gpu_pids = set()
        for g in batch.gpu_processes:
            st = procs.get(g.pid)
            if st is None:
                continue                                   # not a process of the run
            gpu_pids.add(g.pid)
            mem = g.used_memory_bytes or 0
            st.gpu_mem = mem
            by_dev.setdefault(g.device_index, {})[g.pid] = mem
            busy = g.sm_util if g.sm_util is not None else util.get(g.device_index)
            if mem >= IDLE_MEM and busy is not None and busy < 1.0:
                if st.idle_since_ns is None:
                    st.idle_since_ns = t
            else:
                st.idle_since_ns = None
            kids = children.get(g.pid)
            dev_util = util.get(g.device_index)
            if kids and dev_util is not None:
                self.input_ticks += 1
                if self.input_first_ns is None:
                    self.input_first_ns = t
                self.input_last_ns = t
                workers = [c for c in kids if c >= BUSY_CPU]      # an idle helper child is not a worker
                if dev_util < IDLE_UTIL and workers and 2 * len(workers) >= len(kids):
                    self.input_bound_ticks += 1
                    self.input_example = (g.pid, g.device_index, dev_util, len(workers),
                                          sum(workers) / len(workers))
        for st_pid, st in procs.items():
            if st.gpu_mem and st_pid not in gpu_pids:
                st.gpu_mem, st.idle_since_ns = 0, None
        for dev, holders in by_dev.items():
            self.contexts[dev] = holders
            if len(holders) >= 2:
                self.context_ticks[dev] = self.context_ticks.get(dev, 0) + 1
        self.last_ns = t

    def read_uss(self, forked, now_mono_ns: int, every_s: float = 1.0, limit: int = 16) -> None:
        """USS of the fork children of big parents, where the sampler does not read it (runs sample
        RSS only): at most ``limit`` processes, each once per ``every_s``; off the tick (the
        findings recorder's watchdog thread). USS through gpuscope.procs."""
        from gpuscope.procs.read import uss_bytes

        done = 0
        for pid in sorted(forked & self.alive):
            st = self.procs.get(pid)
            parent = self.procs.get(st.ppid) if st is not None else None
            if parent is None or parent.rss_max < COW_MIN_PARENT:
                continue
            if now_mono_ns - self.uss_read_ns.get(pid, -(1 << 62)) < every_s * 1e9:
                continue
            self.uss_read_ns[pid] = now_mono_ns
            uss = uss_bytes(pid)
            if uss is not None and st is not None:
                st.note_uss(uss)
            done += 1
            if done >= limit:
                break

    # -- rules ------------------------------------------------------------------------------------------
    def findings(self, forked: set[int] | frozenset[int] = frozenset(), roles: dict[int, str] | None = None,
                 now_mono_ns: int | None = None) -> list[Finding]:
        roles = roles or {}
        out = self.cow_lost(forked, roles) + self.input_bound(roles) + self.cuda_contexts(roles)
        out += self.idle_gpu_memory(roles, now_mono_ns if now_mono_ns is not None else self.last_ns)
        return out

    def _seen(self, code: str) -> int:
        return self.first_seen.setdefault(code, now_ns())

    def cow_lost(self, forked, roles) -> list[Finding]:
        groups: dict[int, list[int]] = {}
        for pid in forked:
            st = self.procs.get(pid)
            parent = self.procs.get(st.ppid) if st is not None else None
            if st is None or parent is None or st.uss_first is None or parent.rss_max < COW_MIN_PARENT:
                continue
            # At the fork a child owns nothing (USS ~ 0) and shares all its parent's pages. Copied pages
            # move from shared to private; memory it allocates itself adds to USS but leaves the shared part.
            share = COW_SHARE * parent.rss_max
            if st.uss_max >= share and st.shared_min is not None and st.shared_min <= parent.rss_max - share:
                groups.setdefault(st.ppid, []).append(pid)
        out = []
        for ppid, kids in sorted(groups.items()):

            parent = self.procs[ppid]
            kids.sort()
            lines = [f"{roles.get(k, 'fork child')} {k}: USS {(self.procs[k].uss_first or 0) / MIB:.0f} → "
                     f"{self.procs[k].uss_max / MIB:.0f} MiB, shared with others down to "
                     f"{(self.procs[k].shared_min or 0) / MIB:.0f} MiB" for k in kids[:8]]
            worst = max(self.procs[k].uss_max for k in kids)
            out.append(Finding(
                "cow-lost",
                f"{len(kids)} fork child(ren) of {roles.get(ppid, 'process')} {ppid} copied what they inherited: "
                f"their own memory (USS) grew to {worst / MIB:.0f} MiB, against the parent's "
                f"{parent.rss_max / MIB:.0f} MiB RSS (copy-on-write lost: reading Python objects writes their "
                "reference counts)",
                "keep big read-only data in buffers without per-object refcounts (numpy arrays, bytes, "
                "multiprocessing.shared_memory), or call gc.freeze() in the parent just before the fork "
                "(stops the garbage collector from touching inherited objects)",
                Severity.WARNING, tuple(kids),
                evidence({"children": len(kids), "parent RSS MiB": round(parent.rss_max / MIB),
                          "max child USS MiB": round(worst / MIB),
                          "min shared MiB": round(min(self.procs[k].shared_min or 0 for k in kids) / MIB)},
                         lines, kids),
                None, self._seen("cow-lost"), "live"))
        return out

    def input_bound(self, roles) -> list[Finding]:
        if self.input_first_ns is None or not self.input_example:
            return []
        window = (self.input_last_ns - self.input_first_ns) / 1e9
        share = self.input_bound_ticks / max(1, self.input_ticks)
        if window < MIN_WINDOW_S or share < INPUT_SHARE:
            return []
        pid, dev, util, kids, cpu = self.input_example
        return [Finding(
            "input-bound",
            f"GPU {dev} was < {IDLE_UTIL:.0f} % busy ({util:.0f} % last) for {share:.0%} of {window:.0f} s while the "
            f"{kids} worker(s) feeding {roles.get(pid, 'process')} {pid} each used {cpu:.0f} % of a core: the "
            "input pipeline is the bottleneck",
            "give the DataLoader more workers (num_workers, up to the free cores), pin_memory=True with "
            "non_blocking copies, persistent_workers=True, prefetch_factor; move decoding and augmentation "
            "to the GPU or precompute it",
            Severity.WARNING, (pid,),
            evidence({"GPU util %": round(util, 1), "input-bound share": round(share, 2), "window s": round(window, 1),
                      "workers": kids, "worker CPU %": round(cpu, 1)}, (), [pid]),
            None, self._seen("input-bound"), "live")]

    def cuda_contexts(self, roles) -> list[Finding]:
        out = []
        for dev, ticks in sorted(self.context_ticks.items()):
            holders = self.contexts.get(dev, {})
            if ticks < CONTEXT_TICKS or len(holders) < 2:
                continue
            pids = tuple(sorted(holders))
            lines = [f"{roles.get(p, 'process')} {p}: {holders[p] / MIB:.0f} MiB" for p in pids[:16]]
            children = [p for p in pids if self.procs.get(p) and self.procs[p].ppid in holders]
            out.append(Finding(
                "cuda-contexts",
                f"{len(pids)} processes of the run hold memory on GPU {dev} "
                f"({', '.join(f'{holders[p] / MIB:.0f}' for p in pids[:6])} MiB): each has its own CUDA context "
                "(hundreds of MiB before any tensor)" + (f"; {len(children)} of them are children of another "
                                                         "holder (workers that touched CUDA)" if children else ""),
                "one process per GPU: keep CUDA out of DataLoader workers and helper processes (return CPU "
                "tensors, move them to the GPU in the main process); torchrun --nproc-per-node = number of GPUs",
                Severity.WARNING, pids, evidence({"processes": len(pids), "device": dev,
                                                  "MiB in all": round(sum(holders.values()) / MIB)}, lines, pids),
                None, self._seen(f"cuda-contexts-{dev}"), "live"))
        return out

    def idle_gpu_memory(self, roles, now_mono_ns: int) -> list[Finding]:
        idle = [(pid, st) for pid, st in self.procs.items()
                if st.idle_since_ns is not None and st.gpu_mem >= IDLE_MEM
                and (now_mono_ns - st.idle_since_ns) / 1e9 >= IDLE_S]
        since = {pid: st.idle_since_ns or now_mono_ns for pid, st in idle}
        if not idle:
            return []
        idle.sort()
        pids = tuple(p for p, _ in idle)
        lines = [f"{roles.get(p, 'process')} {p}: {st.gpu_mem / MIB:.0f} MiB, "
                 f"idle {(now_mono_ns - since[p]) / 1e9:.0f} s" for p, st in idle[:16]]
        total = sum(st.gpu_mem for _, st in idle)
        return [Finding(
            "idle-gpu-memory",
            f"{len(idle)} process(es) hold {total / MIB:.0f} MiB of GPU memory while their GPU work has been idle "
            f"for {IDLE_S:.0f} s or more",
            "free what is no longer needed (del the tensors, torch.cuda.empty_cache()), end processes that "
            "finished their GPU work, or do not initialise CUDA in processes that do not compute on it",
            Severity.WARNING, pids, evidence({"processes": len(idle), "MiB held": round(total / MIB)}, lines, pids),
            None, self._seen("idle-gpu-memory"), "live")]


# decided by TelemetryWatch on the sampler's batches (the live recorder), kept in findings.json
for _code, _title in (("cow-lost", "a fork child copied the pages it inherited (copy-on-write lost)"),
                      ("input-bound", "the GPU waits while the input workers are busy"),
                      ("cuda-contexts", "several processes hold CUDA contexts on one GPU"),
                      ("idle-gpu-memory", "a process holds GPU memory while idle")):
    declare(_code, inputs=Input.TELEMETRY, phase={Phase.LIVE, Phase.AFTER}, title=_title,
            module="gpuscope.findings.telemetry_rules")
