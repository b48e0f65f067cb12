"""The process tree of a run: who belongs to it, and what each member uses, tick by tick.

Membership is the rule of :class:`gpuscope.procs.membership.RunScope` (root, parent, session, process
group, the run id in the environment), decided once, when a pid first appears in ``/proc``
(``list_pids`` is diffed, so only new pids are read; ``/proc`` is listed only while the kernel's
last handed-out pid changes, see :meth:`ProcessTree._new_pids`). Once a member, a process is
followed by (pid, start time) until it disappears, whoever its parent becomes. Members that
left the root's session or process group are *escaped*.
"""

from __future__ import annotations

import os
import time

from gpuscope.procs import files as procfs
from gpuscope.procs.membership import Reason, RunScope
from gpuscope.procs.read import CLK_TCK, ENDED_STATES, ProcInfo, parse_stat, uss_bytes
from gpuscope.procs.read import read as read_proc
from gpuscope.telemetry.batch import ProcSample, StartedProc

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.procs.existing import Existing

# A member whose stat text stayed the same for IDLE_AFTER reads (asleep, ~1 s at 10 Hz) is read on
# one tick in IDLE_EVERY (2 Hz) until it changes: its CPU is still counted exactly (over the longer
# interval); a wake-up, an exit or a change of RSS is seen at most IDLE_EVERY - 1 ticks later.
IDLE_AFTER = 10
IDLE_EVERY = 5


class _Proc:
    """Mutable record of one member (owned by the sampler thread)."""

    __slots__ = ("pid", "start_ticks", "ppid", "pgrp", "session", "name", "cmdline", "create_time",
                 "via", "first_ns", "last_ns", "state", "ticks", "cpu", "rss", "peak_rss", "threads",
                 "uss", "uss_ns", "gpu_mem", "sm_util", "peak_gpu", "alive", "escaped", "orphaned",
                 "raw", "sample", "idle")

    def __init__(self, st: ProcInfo, via: Reason, t_ns: int) -> None:
        self.pid, self.start_ticks, self.via = st.pid, st.start_ticks, via.value
        self.cmdline = st.cmdline
        self.create_time = st.create_time
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
        self.idle = 0                           # reads in a row that found the same stat text
        age = time.time() - self.create_time
        # first CPU figure: the average since the process started
        self.cpu: float | None = (100.0 * st.cpu_ticks / CLK_TCK / age) if age > 0.05 else None
        self._take(st)

    def _take(self, st: ProcInfo) -> None:
        self.name, self.state, self.ppid = st.comm, st.state, st.ppid
        self.pgrp, self.session, self.ticks, self.threads = st.pgid, st.sid, st.cpu_ticks, st.threads
        self.rss = st.rss
        self.peak_rss = max(self.peak_rss, self.rss)

    def refresh(self, st: ProcInfo, t_ns: int) -> None:
        dt = (t_ns - self.last_ns) / 1e9
        if dt > 0:
            self.cpu = round(100.0 * (st.cpu_ticks - self.ticks) / CLK_TCK / dt, 1)
        self.last_ns = t_ns
        self._take(st)


class ProcessTree:
    """The processes of the run rooted at ``root_pid`` (with ``run_id``: also those carrying
    ``GPUSCOPE_RUN_ID=<run_id>``); the rules are :class:`gpuscope.procs.membership.RunScope`'s."""

    def __init__(self, root_pid: int, *, run_id: str | None = None,
                 uss_interval_s: float | None = None, existing: Existing | None = None) -> None:
        self._scope = RunScope.of(root_pid, run_id)
        if self._scope.root_start is None:
            raise ProcessLookupError(f"no process {root_pid}")
        self.root_pid = root_pid
        self._uss_ns = int(uss_interval_s * 1e9) if uss_interval_s else None
        self._me = os.getpid()
        self._alive: dict[int, _Proc] = {}
        self._all: list[_Proc] = []
        # the host's processes before the program (gpuscope.procs.existing.Existing): none is the run's,
        # so the first tick reads only the pids that came after them
        self._listing: set[str] = set(existing.skippable()) if existing is not None else set()
        self._stat = procfs.StatReader()
        self._loadavg = procfs.ProcFile.host("loadavg", 256)
        self._last_pid: int | None = None
        self._same_pid_ticks = 0
        self._listed_ns = 0
        self._tick = 0

    def close(self) -> None:
        """Release the descriptors kept open on members."""
        self._stat.close()
        self._loadavg.close()

    # -- one tick ---------------------------------------------------------------------------

    def update(self, t_ns: int) -> tuple[list[_Proc], list[_Proc]]:
        """Refresh members, find new ones; returns (started, ended) this tick."""
        new = self._new_pids(t_ns)
        ended = self._refresh(t_ns)
        started = self._discover(new, t_ns)
        if self._uss_ns:
            self._read_uss(t_ns)
        return started, ended

    def _new_pids(self, t_ns: int) -> set[str]:
        """Pids that appeared in ``/proc`` since the last listing.

        Listing ``/proc`` (every process of the host) is most of a quiet tick's cost. No process
        was created while ``/proc/loadavg``'s last pid stays the same, so the listing is skipped
        then: after the last pid changes, ``/proc`` is listed on that tick and the next one (a
        process whose pid was handed out just before the first listing may not be in ``/proc``
        yet), and at least once a second whatever ``loadavg`` says (pid namespaces)."""
        last = procfs.last_pid(self._loadavg)
        if last is None or last != self._last_pid:
            self._last_pid, self._same_pid_ticks = last, 0
        else:
            self._same_pid_ticks += 1
        if last is not None and self._same_pid_ticks >= 2 and t_ns - self._listed_ns < 1_000_000_000:
            return set()
        listing = procfs.list_pids()
        new = listing - self._listing
        self._listing = listing
        self._listed_ns = t_ns
        return new

    def _refresh(self, t_ns: int) -> list[_Proc]:
        ended, changed = [], []
        self._tick += 1
        for rec in list(self._alive.values()):
            if rec.idle >= IDLE_AFTER and (self._tick + rec.pid) % IDLE_EVERY:
                continue                                # asleep for a while: read at 2 Hz (see IDLE_AFTER)
            raw = self._stat.read_raw(rec.pid)
            if raw is not None and raw == rec.raw:      # an idle process: no CPU used, nothing new
                rec.idle += 1
                rec.last_ns = t_ns
                if rec.cpu != 0.0:
                    rec.cpu, rec.sample = 0.0, None
                continue
            st = parse_stat(rec.pid, raw) if raw else None
            if st is None or st.start_ticks != rec.start_ticks:
                rec.alive = False
                del self._alive[rec.pid]
                self._stat.forget(rec.pid)
                ended.append(rec)
                continue
            rec.refresh(st, t_ns)
            rec.raw, rec.sample, rec.idle = raw or b"", None, 0
            changed.append(rec)
        for rec in changed:
            self._classify(rec)
        return ended

    def _classify(self, rec: _Proc) -> None:
        if rec.pid == self.root_pid:
            return
        if rec.escaped is None:
            if rec.session != self._scope.root_sid:
                rec.escaped = "new session"
            elif rec.pgrp != self._scope.root_pgid:
                rec.escaped = "new process group"
        rec.orphaned = rec.ppid not in self._alive

    def _discover(self, new: set[str], t_ns: int) -> list[_Proc]:
        stats: dict[int, ProcInfo] = {}
        for name in new:
            pid = int(name)
            if pid != self._me and pid not in self._alive:
                st = read_proc(pid)
                if st is not None:
                    stats[pid] = st
        if not stats:
            return []
        members = {pid: Reason(rec.via) for pid, rec in self._alive.items()}
        started: list[_Proc] = []
        for pid in self._scope.adopt(dict(stats), members):
            rec = _Proc(stats[pid], members[pid], t_ns)
            self._alive[pid] = rec
            self._all.append(rec)
            started.append(rec)
        for rec in started:
            self._classify(rec)
        return started

    def _read_uss(self, t_ns: int) -> None:
        for rec in self._alive.values():
            if t_ns - rec.uss_ns >= (self._uss_ns or 0):
                rec.uss, rec.uss_ns, rec.sample = uss_bytes(rec.pid), t_ns, None

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

    def running(self) -> bool:
        """Whether a member still runs (a zombie has ended: it only waits for its parent's wait)."""
        return any(rec.state not in ENDED_STATES for rec in self._alive.values())

    @staticmethod
    def info(rec: _Proc) -> StartedProc:
        return StartedProc(rec.pid, rec.ppid, rec.name, rec.cmdline, rec.create_time, rec.first_ns, rec.via)

    def summary(self, gpu: bool) -> dict[int, dict[str, Any]]:
        """Every process ever seen (a reused pid: the latest one)."""
        out: dict[int, dict[str, Any]] = {}
        for rec in self._all:
            out[rec.pid] = {
                "pid": rec.pid, "ppid": rec.ppid, "name": rec.name, "cmdline": list(rec.cmdline),
                "create_time": rec.create_time, "start_ticks": rec.start_ticks,
                "first_seen_ns": rec.first_ns, "last_seen_ns": rec.last_ns,
                "state": rec.state, "alive": rec.alive, "via": rec.via, "escaped": rec.escaped,
                "orphaned": rec.orphaned, "cpu_seconds": rec.ticks / CLK_TCK,
                "peak_rss_bytes": rec.peak_rss, "uss_bytes": rec.uss, "threads": rec.threads,
                "peak_gpu_mem_bytes": rec.peak_gpu if gpu else None,
            }
        return out

    def escaped(self, alive_only: bool = True) -> list[int]:
        """Members that left the root's session or process group."""
        recs = self._alive.values() if alive_only else self._all
        return sorted({r.pid for r in recs if r.escaped})
