"""Samplers: a background thread that samples on a steady cadence and hands out immutable batches.

The schedule is a fixed grid (``t0 + k * interval`` on ``time.monotonic_ns``), so it does not
drift; a tick that overruns skips the grid points it missed (counted in ``missed``) instead of
bunching up. Listeners are called on the sampler thread with one :class:`SampleBatch` per tick;
a listener that raises is logged once and keeps being called.

:class:`Sampler` serves ``gpuscope monitor`` (a pid, or host only); :class:`RunSampler` follows
one run's process tree and can write its batches into the run store.
"""

from __future__ import annotations

import time
import threading

from gpuscope.procs.namespace import in_host_pid_namespace, map_gpu_pids
from gpuscope.procs.read import read as read_proc
from gpuscope.telemetry import NOT_OPENED, log
from gpuscope.telemetry.batch import SampleBatch
from gpuscope.telemetry.gpu import GpuProcessSample, NoGpuBackend, open_backend
from gpuscope.telemetry.host import HostSampler
from gpuscope.telemetry.tree import ProcessTree

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any, Callable

    from gpuscope.telemetry.batch import ProcSample, StartedProc
    from gpuscope.telemetry.gpu import GpuBackend
    from gpuscope.telemetry.storewriter import StoreWriter

    Listener = Callable[[SampleBatch], None]


MIN_INTERVAL_S, MAX_INTERVAL_S, DEFAULT_INTERVAL_S = 0.02, 1.0, 0.1


def check_interval(interval_s: float) -> float:
    """1-50 Hz; anything else is a ValueError with one clear line."""
    if not (MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S):
        raise ValueError(f"sampling interval must be between {MIN_INTERVAL_S} s and {MAX_INTERVAL_S} s "
                         f"(1-50 Hz), not {interval_s}")
    return float(interval_s)


def check_timing(interval_s: float, duration_s: float | None) -> float:
    """A command's ``--interval`` and ``--duration``: the interval as :func:`check_interval` takes
    it; a duration, when given, more than 0; anything else is a ValueError with one clear line."""
    interval_s = check_interval(interval_s)
    if duration_s is not None and duration_s <= 0:
        raise ValueError("--duration must be more than 0 seconds")
    return interval_s


def gpu_by_pid(procs: list[GpuProcessSample]) -> dict[int, tuple[int | None, float | None]]:
    """Per pid: GPU memory summed over devices, the highest SM util of its devices (None if unknown)."""
    out: dict[int, tuple[int | None, float | None]] = {}
    for p in procs:
        mem, sm = out.get(p.pid, (None, None))
        if p.used_memory_bytes is not None:
            mem = (mem or 0) + p.used_memory_bytes
        if p.sm_util is not None:
            sm = max(sm or 0.0, p.sm_util)
        out[p.pid] = (mem, sm)
    return out


class Sampler:
    """Samples host totals, GPUs and (with a ``tree``) a process tree at ``interval_s``."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, *, tree: ProcessTree | None = None,
                 gpu: GpuBackend | None = None, host: bool = True, name: str = "gpuscope-sampler",
                 lazy: bool = False) -> None:
        self.interval_s = check_interval(interval_s)
        self.tree = tree
        self._own_gpu = gpu is None
        self._gpu: GpuBackend | None = gpu
        self._host = HostSampler() if host else None
        self._listeners: list[Listener] = []
        self._failed_listeners: set[int] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._name = name
        self._said: set[str] = set()
        self._pending_notes: list[str] = []
        self._container = in_host_pid_namespace() is False   # NVML's pids are the host's: map them
        self.seq = 0
        self.missed = 0
        self._stopped = False
        if not lazy:
            self._open()

    @property
    def gpu(self) -> GpuBackend:
        """The GPU backend. A ``lazy`` sampler opens it (NVML: pynvml's import, then the
        driver's init) on its own thread at its first tick, or does without it when nothing of
        its tree is alive any more (:data:`NOT_OPENED`); asking earlier opens it here, or waits
        for the thread that is opening it."""
        if self._gpu is None:
            self._open()
        assert self._gpu is not None
        return self._gpu

    def _open(self, nothing_alive: bool = False) -> None:
        """Open the GPU backend (once; under the sampler's lock, so one thread does it), or with
        ``nothing_alive`` settle for :data:`NOT_OPENED`."""
        with self._lock:
            if self._gpu is None:
                self._gpu = NoGpuBackend(NOT_OPENED) if nothing_alive else open_backend()
            self._opened()

    def _opened(self) -> None:
        """What needs the GPU backend, once it is open (subclasses)."""

    # -- listeners ---------------------------------------------------------------------------

    def add_listener(self, fn: Listener) -> None:
        """``fn(batch)`` is called on the sampler thread after every tick."""
        with self._lock:
            self._listeners = [*self._listeners, fn]

    def remove_listener(self, fn: Listener) -> None:
        with self._lock:
            self._listeners = [f for f in self._listeners if f is not fn]

    def _deliver(self, batch: SampleBatch) -> None:
        for fn in self._listeners:
            try:
                fn(batch)
            except Exception as exc:  # noqa: BLE001 - thread boundary: a listener's bug must not stop sampling
                if id(fn) not in self._failed_listeners:
                    self._failed_listeners.add(id(fn))
                    log().exception("telemetry listener %r failed (logged once): %s", fn, exc)

    # -- sampling ----------------------------------------------------------------------------

    def sample_once(self) -> SampleBatch:
        """Take one sample now (the thread calls this; tests may too)."""
        with self._lock:
            t_ns, wall_ns = time.monotonic_ns(), time.time_ns()
            started: tuple[StartedProc, ...] = ()
            ended: tuple[int, ...] = ()
            procs: tuple[ProcSample, ...] = ()
            if self.tree is not None:
                new, gone = self.tree.update(t_ns)
                members = self.tree.pids()
                if self._gpu is None and not self.tree.running():
                    self._open(nothing_alive=True)
            gpu_on = self.gpu.available
            devices = tuple(self.gpu.devices()) if gpu_on else ()
            gprocs = self.gpu.processes() if gpu_on else []
            if self.tree is not None:
                unseen: set[int] = set()
                if self._container and gprocs:
                    gprocs, unseen = self._local_gpu_pids(gprocs, members)
                gprocs = [p for p in gprocs if p.pid in members or p.pid in unseen]
                procs = self.tree.samples(gpu_by_pid(gprocs))
                started = tuple(ProcessTree.info(r) for r in new)
                ended = tuple(r.pid for r in gone)
            host = self._host.sample() if self._host is not None else None
            notes = tuple(self._pending_notes + self.gpu.take_notes())
            self._pending_notes = []
            self.seq += 1
            return SampleBatch(self.seq, t_ns, wall_ns, host, procs, devices, tuple(gprocs),
                               started, ended, notes)

    def _local_gpu_pids(self, gprocs: list[GpuProcessSample],
                        members: set[int]) -> tuple[list[GpuProcessSample], set[int]]:
        """NVML's host pids as this PID namespace's run members, and the host pids of processes
        not visible here (they keep their host pid: their memory is shown, with a note, not dropped)."""
        procs = {pid: info for pid in members if (info := read_proc(pid)) is not None}
        mapping = {g.nvml_pid: g for g in map_gpu_pids(((p.pid, p.used_memory_bytes) for p in gprocs),
                                                       host=False, procs=procs)}
        out, unseen = [], set()
        for p in gprocs:
            g = mapping[p.pid]
            if g.local_pid is None:
                self._note_once(f"GPU memory of {g.label}: gpuscope runs in a container's PID namespace")
                unseen.add(p.pid)
                out.append(p)
            else:
                out.append(GpuProcessSample(g.local_pid, p.device_index, p.used_memory_bytes, p.sm_util))
        return out, unseen

    def _note_once(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self._pending_notes.append(text)

    def _note_error(self, exc: Exception) -> None:
        text = f"telemetry sample failed: {type(exc).__name__}: {exc}"
        if text not in self._said:
            self._said.add(text)
            self._pending_notes.append(text)
            log().exception("%s", text)

    def _run(self) -> None:
        step = int(self.interval_s * 1e9)
        next_t = time.monotonic_ns()
        while not self._stop.is_set():
            try:
                batch = self.sample_once()
            except Exception as exc:  # noqa: BLE001 - thread boundary: a failed tick is noted, the next one runs
                self._note_error(exc)
            else:
                self._deliver(batch)
            next_t += step
            now = time.monotonic_ns()
            if next_t <= now:                      # overran: skip to the next grid point
                skipped = (now - next_t) // step + 1
                self.missed += skipped
                next_t += skipped * step
            self._stop.wait((next_t - now) / 1e9)

    def start(self) -> None:
        """Start the background thread (once)."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, final_sample: bool = True) -> None:
        """Stop the thread; with ``final_sample``, take and deliver one last sample. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if final_sample and self._thread is not None and not self._thread.is_alive():
            try:
                self._deliver(self.sample_once())
            except Exception as exc:  # noqa: BLE001 - stopping must not raise because of a last sample
                self._note_error(exc)
        self._close()

    def _close(self) -> None:
        if self._own_gpu and self._gpu is not None:
            self._gpu.close()
        if self._host is not None:
            self._host.close()
        if self.tree is not None:
            with self._lock:
                self.tree.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class RunSampler(Sampler):
    """The sampler of one run: its process tree, GPUs, host, and optionally the run store.

    ``store`` is a path of the store (its own connection is opened), ``True`` for the default
    store, or an open ``sqlite3.Connection`` used only from the sampler thread. ``run_id`` also
    finds escaped descendants by the ``GPUSCOPE_RUN_ID=<run_id>`` in their environment.
    ``lazy``: NVML and the store are opened on the sampler's thread at its first tick, not here
    (``gpuscope run`` starts the sampler right after the program and must not delay either).
    ``existing``: the host's processes before the program (``gpuscope.procs.existing.Existing``), which
    the first tick need not read.
    """

    def __init__(self, root_pid: int, interval_s: float = DEFAULT_INTERVAL_S, *,
                 gpu: GpuBackend | None = None, store: Any = None, run_id: str | None = None,
                 uss_interval_s: float | None = None,
                 host: bool = True, flush_s: float = 1.0, lazy: bool = False, existing: Any = None) -> None:
        if store is not None and store is not False and run_id is None:
            raise ValueError("a RunSampler with a store needs a run_id")
        tree = ProcessTree(root_pid, run_id=run_id, uss_interval_s=uss_interval_s, existing=existing)
        self.root_pid = root_pid
        self.run_id = run_id
        self._writer: StoreWriter | None = None
        self._store = None if store is False else store
        self._flush_s = flush_s
        super().__init__(interval_s, tree=tree, gpu=gpu, host=host, name=f"gpuscope-sampler-{root_pid}",
                         lazy=lazy)

    def _opened(self) -> None:
        """The store writer (first of the listeners), once the GPU backend says what it is."""
        if self._store is None or self._writer is not None:
            return
        from gpuscope.telemetry.storewriter import StoreWriter

        store, self._store = self._store, None
        writer = self._writer = StoreWriter(None if store is True else store, self.run_id or "",
                                            interval_s=self.interval_s, root_pid=self.root_pid,
                                            flush_s=self._flush_s, summary=self.process_summary,
                                            gpu_reason=self.gpu.reason)
        with self._lock:
            self._listeners = [writer, *self._listeners]

    def process_summary(self) -> dict[int, dict[str, Any]]:
        """Per pid: cpu_seconds, peak_rss_bytes, peak_gpu_mem_bytes (None without GPU), create_time,
        name, cmdline, first_seen_ns/last_seen_ns (monotonic), state, alive, escaped, orphaned."""
        assert self.tree is not None
        with self._lock:
            return self.tree.summary(gpu=self.gpu.available)

    def escaped_pids(self, alive_only: bool = True) -> list[int]:
        """Processes of the tree that left the root's session or process group."""
        assert self.tree is not None
        with self._lock:
            return self.tree.escaped(alive_only)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        super()._close()

