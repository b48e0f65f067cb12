"""The process tree of a run: who belongs to it, and what each member uses, tick by tick.

Membership is decided once, when a pid first appears in ``/proc`` (``procfs.list_pids`` is
diffed each tick, so only new pids are read). A new process belongs to the tree when

* ``parent``: its parent is a live member (children of known processes, every tick);
* ``session`` / ``pgrp``: the root leads a session (or process group) and the process is in it,
  which catches a child whose parent died before we saw it (reparented to PID 1 or a subreaper);
* ``env``: its environment carries the run's marker (``GPUSCOPE_RUN_ID=<id>``), which survives
  a double fork *and* ``setsid`` (the intermediate parent is usually gone within a millisecond,
  long before the next tick).

Once a member, a process is followed by (pid, start time) until it disappears, whoever its
parent becomes. Members that left the root's session or process group are *escaped*.
"""

from __future__ import annotations

import os
import time
from typing import Any

from gpuscope.telemetry import procfs
from gpuscope.telemetry.batch import ProcInfo, ProcSample


class _Proc:
    """Mutable record of one member (owned by the sampler thread)."""

    __slots__ = ("pid", "start_ticks", "ppid", "pgrp", "session", "name", "cmdline", "create_time",
                 "via", "first_ns", "last_ns", "state", "ticks", "cpu", "rss", "peak_rss", "threads",
                 "uss", "uss_ns", "gpu_mem", "sm_util", "peak_gpu", "alive", "escaped", "orphaned",
                 "raw", "sample")

    def __init__(self, pid: int, st: procfs.Stat, via: str, t_ns: int, boot: float) -> None:
        self.pid, self.start_ticks, self.via = pid, st.start_ticks, via
        self.cmdline = procfs.cmdline(pid)
        self.create_time = boot + st.start_ticks / procfs.CLK_TCK
        self.first_ns = self.last_ns = t_ns
        self.uss: int | None = None
        self.uss_ns = 0
        self.gpu_mem: int | None = None
        self.sm_util: float | None = None
        self.peak_gpu = 0
        self.peak_rss = 0
        self.alive = True
        self.escaped: str | None = None
        self.orphaned = False
        self.raw = b""                          # last stat text: unchanged text = nothing to parse
        self.sample: ProcSample | None = None   # last immutable sample, reused while unchanged
        age = time.time() - self.create_time
        # first CPU figure: the average since the process started
        self.cpu: float | None = (100.0 * st.cpu_ticks / procfs.CLK_TCK / age) if age > 0.05 else None
        self._take(st)

    def _take(self, st: procfs.Stat) -> None:
        self.name, self.state, self.ppid = st.name, st.state, st.ppid
        self.pgrp, self.session, self.ticks, self.threads = st.pgrp, st.session, st.cpu_ticks, st.threads
        self.rss = st.rss_pages * procfs.PAGE_SIZE
        self.peak_rss = max(self.peak_rss, self.rss)

    def refresh(self, st: procfs.Stat, t_ns: int) -> None:
        dt = (t_ns - self.last_ns) / 1e9
        if dt > 0:
            self.cpu = round(100.0 * (st.cpu_ticks - self.ticks) / procfs.CLK_TCK / dt, 1)
        self.last_ns = t_ns
        self._take(st)


class ProcessTree:
    """Descendants of ``root_pid`` (see the module docstring for the rules)."""

    def __init__(self, root_pid: int, *, env_marker: str | None = None,
                 uss_interval_s: float | None = None) -> None:
        root = procfs.read_stat(root_pid)
        if root is None:
            raise ProcessLookupError(f"no process {root_pid}")
        self.root_pid = root_pid
        self._root = root
        self._marker = env_marker.encode() if env_marker else None
        self._uss_ns = int(uss_interval_s * 1e9) if uss_interval_s else None
        self._uid = os.getuid()
        self._me = os.getpid()
        self._boot = procfs.boot_time()
        self._alive: dict[int, _Proc] = {}
        self._all: list[_Proc] = []
        self._listing: set[str] = set()
        self._stat = procfs.StatReader()

    def close(self) -> None:
        """Release the descriptors kept open on members."""
        self._stat.close()

    # -- one tick ---------------------------------------------------------------------------

    def update(self, t_ns: int) -> tuple[list[_Proc], list[_Proc]]:
        """Refresh members, find new ones; returns (started, ended) this tick."""
        listing = procfs.list_pids()
        new = listing - self._listing
        self._listing = listing
        ended = self._refresh(t_ns)
        started = self._discover(new, t_ns)
        if self._uss_ns:
            self._read_uss(t_ns)
        return started, ended

    def _refresh(self, t_ns: int) -> list[_Proc]:
        ended, changed = [], []
        for rec in list(self._alive.values()):
            raw = self._stat.read_raw(rec.pid)
            if raw is not None and raw == rec.raw:      # an idle process: no CPU used, nothing new
                rec.last_ns = t_ns
                if rec.cpu != 0.0:
                    rec.cpu, rec.sample = 0.0, None
                continue
            st = procfs.parse_stat(raw) if raw else None
            if st is None or st.start_ticks != rec.start_ticks:
                rec.alive = False
                del self._alive[rec.pid]
                self._stat.forget(rec.pid)
                ended.append(rec)
                continue
            rec.refresh(st, t_ns)
            rec.raw, rec.sample = raw, None
            changed.append(rec)
        for rec in changed:
            self._classify(rec)
        return ended

    def _classify(self, rec: _Proc) -> None:
        if rec.pid == self.root_pid:
            return
        if rec.escaped is None:
            if rec.session != self._root.session:
                rec.escaped = "new session"
            elif rec.pgrp != self._root.pgrp:
                rec.escaped = "new process group"
        rec.orphaned = rec.ppid not in self._alive

    def _discover(self, new: set[str], t_ns: int) -> list[_Proc]:
        pending: dict[int, procfs.Stat] = {}
        for name in new:
            pid = int(name)
            if pid != self._me and pid not in self._alive:
                st = procfs.read_stat(pid)
                if st is not None:
                    pending[pid] = st
        started: list[_Proc] = []
        self._adopt(pending, started, t_ns)
        if self._marker and pending:
            for pid, st in list(pending.items()):
                if self._env_member(pid, st):
                    self._add(pid, st, "env", t_ns, started)
                    del pending[pid]
            self._adopt(pending, started, t_ns)
        for rec in started:
            self._classify(rec)
        return started

    def _adopt(self, pending: dict[int, procfs.Stat], started: list[_Proc], t_ns: int) -> None:
        """Add pending processes that pass a cheap rule, until nothing changes."""
        changed = True
        while changed and pending:
            changed = False
            for pid, st in list(pending.items()):
                via = self._cheap_rule(pid, st)
                if via:
                    self._add(pid, st, via, t_ns, started)
                    del pending[pid]
                    changed = True

    def _cheap_rule(self, pid: int, st: procfs.Stat) -> str | None:
        root = self._root
        if pid == self.root_pid:
            return "root" if st.start_ticks == root.start_ticks else None
        if st.ppid in self._alive:
            return "parent"
        if st.start_ticks < root.start_ticks:
            return None
        if root.session == self.root_pid and st.session == root.session:
            return "session"
        if root.pgrp == self.root_pid and st.pgrp == root.pgrp:
            return "pgrp"
        return None

    def _env_member(self, pid: int, st: procfs.Stat) -> bool:
        if st.start_ticks < self._root.start_ticks or self._marker is None:
            return False
        return procfs.owner(pid) == self._uid and procfs.environ_has(pid, self._marker)

    def _add(self, pid: int, st: procfs.Stat, via: str, t_ns: int, started: list[_Proc]) -> None:
        rec = _Proc(pid, st, via, t_ns, self._boot)
        self._alive[pid] = rec
        self._all.append(rec)
        started.append(rec)

    def _read_uss(self, t_ns: int) -> None:
        for rec in self._alive.values():
            if t_ns - rec.uss_ns >= (self._uss_ns or 0):
                rec.uss, rec.uss_ns, rec.sample = procfs.uss_bytes(rec.pid), t_ns, None

    # -- views -----------------------------------------------------------------------------

    def samples(self, gpu_by_pid: dict[int, tuple[int | None, float | None]]) -> tuple[ProcSample, ...]:
        """Immutable samples of the live members, merged with per-pid GPU (memory, SM util)."""
        out = []
        for rec in self._alive.values():
            mem, sm = gpu_by_pid.get(rec.pid, (None, None))
            if rec.sample is None or mem != rec.gpu_mem or sm != rec.sm_util:
                rec.gpu_mem, rec.sm_util = mem, sm
                if mem is not None:
                    rec.peak_gpu = max(rec.peak_gpu, mem)
                rec.sample = ProcSample(rec.pid, rec.ppid, rec.name, rec.state, rec.cpu, rec.rss, rec.uss,
                                        rec.threads, mem, sm)
            out.append(rec.sample)
        return tuple(out)

    def pids(self) -> set[int]:
        """Live members."""
        return set(self._alive)

    @staticmethod
    def info(rec: _Proc) -> ProcInfo:
        return ProcInfo(rec.pid, rec.ppid, rec.name, rec.cmdline, rec.create_time, rec.first_ns, rec.via)

    def summary(self, gpu: bool) -> dict[int, dict[str, Any]]:
        """Every process ever seen (a reused pid: the latest one)."""
        out: dict[int, dict[str, Any]] = {}
        for rec in self._all:
            out[rec.pid] = {
                "pid": rec.pid, "ppid": rec.ppid, "name": rec.name, "cmdline": list(rec.cmdline),
                "create_time": rec.create_time, "first_seen_ns": rec.first_ns, "last_seen_ns": rec.last_ns,
                "state": rec.state, "alive": rec.alive, "via": rec.via, "escaped": rec.escaped,
                "orphaned": rec.orphaned, "cpu_seconds": rec.ticks / procfs.CLK_TCK,
                "peak_rss_bytes": rec.peak_rss, "uss_bytes": rec.uss, "threads": rec.threads,
                "peak_gpu_mem_bytes": rec.peak_gpu if gpu else None,
            }
        return out

    def escaped(self, alive_only: bool = True) -> list[int]:
        """Members that left the root's session or process group."""
        recs = self._alive.values() if alive_only else self._all
        return sorted({r.pid for r in recs if r.escaped})
