"""Finding suspects: the :class:`Scanner` observes the machine (repeatedly, for idle checks)
and turns what it saw into a :class:`~gpuscope.cleanup.model.ScanResult`.

The CLI observes for a short window and scans once; the app keeps one Scanner, calls
:meth:`Scanner.observe` on its timer and :meth:`Scanner.scan` when the Cleanup tab refreshes.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import gpuscope.cleanup.model as m
from gpuscope.cleanup.evidence import process_evidence, short_cmd
from gpuscope.cleanup.gpu_holders import (GpuHolding, IdleTracker, gpu_holdings, holdings_from, local_holdings,
                                          open_gpu_backend)
from gpuscope.cleanup.runlink import link_runs
from gpuscope.cleanup.safety import Policy, listing_refusal
from gpuscope.cleanup.shm import SHM_MIN_AGE_S
from gpuscope.cleanup.snapshot import ProcInfo, ProcTable, ancestors, nvidia_files_open
from gpuscope.cleanup.suspects import add_gpu_ghosts, add_shm_suspects, process_reasons, zombie_suspect
from gpuscope.procs.namespace import in_host_pid_namespace

if TYPE_CHECKING:
    from gpuscope.store.db import Connection


class Scanner:
    """Observes processes, GPU holders and /dev/shm and lists suspects."""

    def __init__(self, *, conn: Connection | None = None, backend: Any = None,
                 use_gpu: bool = True, idle_window_s: float = 300.0, shm_dir: str = "/dev/shm",
                 shm_min_age_s: float = SHM_MIN_AGE_S, policy: Policy | None = None,
                 verify_gpu_pids: bool = True) -> None:
        """``verify_gpu_pids``: a pid NVML names counts as a GPU user here only if it has a
        /dev/nvidia* device open (else it is a pid of another PID namespace). Only a test with
        a fake NVML turns this off."""
        self.conn = conn
        self.verify_gpu_pids = verify_gpu_pids
        self._owns_backend = backend is None
        if use_gpu:
            self.backend, self.gpu_skip_reason = open_gpu_backend(backend)
        else:
            self.backend, self.gpu_skip_reason = None, "GPU checks were turned off"
        self.tracker = IdleTracker(idle_window_s)
        self.shm_dir = shm_dir
        self.shm_min_age_s = shm_min_age_s
        self.policy = policy or Policy()
        self._prev: ProcTable | None = None
        self._cur: ProcTable | None = None
        self.holdings: dict[int, GpuHolding] = {}
        self._first_at: float | None = None
        self._zombie_seen: dict[tuple[int, float], float] = {}
        self.gpu_error: str | None = None
        self._container = in_host_pid_namespace() is False   # NVML's pids are the host's: map them

    def close(self) -> None:
        """Release the GPU backend if this scanner opened it."""
        if self.backend is not None and self._owns_backend:
            close = getattr(self.backend, "close", None)
            if close is not None:
                close()
        self.backend = None

    def __enter__(self) -> "Scanner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def gpu_checked(self) -> bool:
        return self.backend is not None

    def observe(self, gpu_processes: list | None = None, gpu_devices: list | None = None) -> ProcTable:
        """Take one observation (processes, GPU holders) and feed the idle tracker.

        The app may pass the telemetry sampler's latest ``GpuProcessSample`` and ``DeviceSample``
        lists instead of letting the scanner query NVML again.
        """
        table = ProcTable.take()
        self._prev, self._cur = self._cur, table
        if self._first_at is None:
            self._first_at = table.at
        if self.backend is not None:
            try:
                if gpu_processes is None:
                    self.holdings = local_holdings(gpu_holdings(self.backend), table, self._container)
                else:
                    self.holdings = holdings_from(gpu_processes, gpu_devices or [])
                self.tracker.observe(table.at, table, self.holdings)
                self.gpu_error = None
            except Exception as exc:  # noqa: BLE001 - a failing NVML read skips GPU evidence only
                self.gpu_error = f"reading GPU processes failed: {exc}"
                self.holdings = {}
        live = set()
        for proc in table:
            if proc.is_zombie:
                key = (proc.pid, proc.create_time)
                live.add(key)
                self._zombie_seen.setdefault(key, table.at)
        self._zombie_seen = {k: v for k, v in self._zombie_seen.items() if k in live}
        return table

    def sample(self, seconds: float, interval: float = 1.0) -> None:
        """Observe now and every ``interval`` seconds until ``seconds`` have passed; the
        closing observation is the one :meth:`scan` takes."""
        end = time.monotonic() + max(0.0, seconds)
        self.observe()
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(max(interval, 0.05), left))
            if end - time.monotonic() > 0.05:
                self.observe()

    def cpu_share(self, proc: ProcInfo) -> float | None:
        """Share of one core ``proc`` used between the last two observations."""
        if self._prev is None or self._cur is None:
            return None
        before = self._prev.get(proc.pid)
        dt = self._cur.at - self._prev.at
        if before is None or before.create_time != proc.create_time or dt <= 0:
            return None
        return max(0.0, (proc.cpu_time - before.cpu_time) / dt)

    def _transient_zombie(self, proc: ProcInfo) -> bool:
        """A zombie that only the latest of several observations saw: its parent is probably
        reaping it right now (with a single observation every zombie is listed)."""
        return self._prev is not None and self.zombie_seen_s(proc) <= 0

    def zombie_seen_s(self, proc: ProcInfo) -> float:
        assert self._cur is not None
        return self._cur.at - self._zombie_seen.get((proc.pid, proc.create_time), self._cur.at)

    def scan(self, gpu_processes: list | None = None, gpu_devices: list | None = None) -> m.ScanResult:
        """Observe once more (with the sampler's GPU samples, if given, as in :meth:`observe`)
        and list every suspect with its reasons and evidence."""
        table = self.observe(gpu_processes, gpu_devices)
        now = time.time()
        skip = {os.getpid(), *ancestors(os.getpid())}
        links = link_runs(self.conn, table) if self.conn is not None else {}
        idle = {v.pid: v for v in self.tracker.idle(table.at)}
        suspects: dict[str, m.Suspect] = {}
        notes: list[str] = []
        s: m.Suspect | None
        for proc in table:
            if proc.pid in skip or proc.is_kernel_thread or proc.pid == 1:
                continue
            if proc.is_zombie:
                if self._transient_zombie(proc):
                    continue
                s = zombie_suspect(self, proc, table, now)
            else:
                s = self._process_suspect(proc, table, now, links, idle)
            if s is not None:
                if proc.pid in links and proc.is_zombie:
                    s.add_reason(m.RUN_LEFTOVER, links[proc.pid].text(now))
                suspects[s.key] = s
        add_gpu_ghosts(self, table, suspects)
        add_shm_suspects(self, table, suspects, notes, now)
        return m.ScanResult(_ordered(suspects), self._notes(table, suspects) + notes, now,
                            self.gpu_checked, self.gpu_skip_reason,
                            table.at - (self._first_at or table.at))

    def _process_suspect(self, proc: ProcInfo, table: ProcTable, now: float, links: dict,
                         idle: dict) -> m.Suspect | None:
        hold = self.holdings.get(proc.pid)
        if hold is not None and self.verify_gpu_pids and nvidia_files_open(proc.pid) is False:
            hold = None   # NVML's pid is another namespace's process (see add_gpu_ghosts)
        verdict = idle.get(proc.pid) if hold is not None else None
        if verdict is not None and verdict.create_time != proc.create_time:
            verdict = None
        reasons = process_reasons(self, proc, table, now, links.get(proc.pid), verdict)
        if not reasons:
            return None
        ev = process_evidence(proc, table, self.cpu_share(proc), hold, now)
        link = links.get(proc.pid)
        if link is not None:
            ev.run_id, ev.run_status = link.run_id, link.status
        return m.Suspect(
            key=f"pid:{proc.pid}", kind=m.KIND_PROCESS,
            title=f"{proc.name} (pid {proc.pid}): {short_cmd(proc)}", reasons=reasons, evidence=ev,
            identity=m.ProcIdentity(proc.pid, proc.create_time), actions=[m.TERMINATE, m.KILL],
            blocked=listing_refusal(proc, self.policy))

    def _notes(self, table: ProcTable, suspects: dict[str, m.Suspect]) -> list[str]:
        notes = []
        if self.backend is None:
            notes.append(f"GPU checks skipped: {self.gpu_skip_reason}")
        elif self.gpu_error:
            notes.append(f"GPU checks incomplete: {self.gpu_error}")
        elif self.tracker.window_s > 0 and self._cur is not None and self._first_at is not None \
                and self._cur.at - self._first_at < self.tracker.window_s:
            notes.append(f"idle GPU holders need {self.tracker.window_s:g} s of observation; "
                         f"observed {self._cur.at - self._first_at:.1f} s so far")
        init_zombies = [s for s in suspects.values() if s.kind == m.KIND_ZOMBIE
                        and isinstance(s.evidence, m.ProcessEvidence) and s.evidence.ppid == 1]
        if init_zombies:
            init = table.get(1)
            name = init.name if init else "init"
            notes.append(f"PID 1 ({name}) has not reaped {len(init_zombies)} zombie(s) it adopted: "
                         "it is not an init that reaps orphans. No signal removes such zombies; start "
                         "containers with an init (docker run --init, or tini/dumb-init as PID 1).")
        return notes


_KIND_ORDER = {m.KIND_PROCESS: 0, m.KIND_ZOMBIE: 1, m.KIND_SHM: 2, m.KIND_GPU_GHOST: 3}


def _ordered(suspects: dict[str, m.Suspect]) -> list[m.Suspect]:
    return sorted(suspects.values(), key=lambda s: (_KIND_ORDER.get(s.kind, 9), s.pid or 0, s.key))


def scan(*, conn: Connection | None = None, backend: Any = None, use_gpu: bool = True,
         idle_window_s: float = 5.0, shm_dir: str = "/dev/shm", shm_min_age_s: float = SHM_MIN_AGE_S,
         policy: Policy | None = None, interval: float = 1.0) -> m.ScanResult:
    """One listing: observe for the idle window (GPU present) or briefly, then scan."""
    with Scanner(conn=conn, backend=backend, use_gpu=use_gpu, idle_window_s=idle_window_s,
                 shm_dir=shm_dir, shm_min_age_s=shm_min_age_s, policy=policy) as scanner:
        window = idle_window_s if scanner.gpu_checked and idle_window_s > 0 else 0.3
        scanner.sample(window, interval=min(interval, window))
        return scanner.scan()
