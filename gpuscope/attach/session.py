"""Attach to a process tree gpuscope did not start: adopt it, follow it, read it, record it.

:class:`AttachSession` adopts the tree rooted at a pid (the membership rules of
:mod:`gpuscope.procs.membership`, through the telemetry sampler's process tree), classifies each
process from the outside (:mod:`gpuscope.attach.roles`), reads stacks on demand
(:mod:`gpuscope.attach.stacks`) and keeps the findings of :mod:`gpuscope.attach.checks`. It sends
no signal and writes nothing outside its own run folder; :meth:`detach` leaves the job running.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from gpuscope.attach import checks, roles
from gpuscope.attach.target import check_target
from gpuscope.attach.view import AttachedProcess, AttachView
from gpuscope.errors import UserError
from gpuscope.procs.read import read as read_proc

if TYPE_CHECKING:
    from gpuscope.attach.profile import Profile
    from gpuscope.attach.stacks import TreeStacks
    from gpuscope.finding import Finding
    from gpuscope.procs.read import ProcInfo
    from gpuscope.telemetry.batch import SampleBatch
    from gpuscope.telemetry.gpu import GpuBackend
    from gpuscope.telemetry.sampler import RunSampler

FIRST_PICTURE_S = 5.0      # how long start() waits for the sampler's first tick
PROBES = 4                 # stack reads to tell what a spawned or forked child runs
PROBE_AFTER_S = 1.0        # wait between them: this, times the reads so far
SHM_EVERY_S = 5.0          # how often the tree's /dev/shm files are listed (its maps and descriptors)


class AttachSession:
    """One attached tree. ``record``: keep it as a run (kind "attached") in the store and History;
    ``stuck_after_s``: how long without CPU (and with unchanged stacks) makes it look stuck."""

    def __init__(self, root_pid: int, interval_s: float = 0.5, *, record: bool = True,
                 gpu: GpuBackend | None = None, store: Any = None, stuck_after_s: float = 10.0,
                 nonblocking: bool = True) -> None:
        self.root_pid = root_pid
        self.interval_s = interval_s
        self.record = record
        self.nonblocking = nonblocking
        self._gpu, self._store = gpu, store
        self.run_id = ""
        self.run_dir: str | None = None
        self.started_ns = 0
        self.sampler: RunSampler | None = None
        self.watch = checks.Watch(root_pid, stuck_after_s)
        self._lock = threading.RLock()
        self._procs: dict[int, AttachedProcess] = {}
        self._infos: dict[int, ProcInfo] = {}
        self._roles: dict[int, roles.Role] = {}
        self._summary: dict[int, dict[str, Any]] = {}
        self._stacks: TreeStacks | None = None
        self._profile: Profile | None = None
        self._notes: list[str] = []
        self._first = threading.Event()
        self._ended = threading.Event()
        self._probe_wake = threading.Event()
        self._probed: dict[int, tuple[int, float]] = {}     # pid -> (stack reads for its role, last one)
        self._closing = False
        self._probe: threading.Thread | None = None
        self._detached = False

    # -- start ------------------------------------------------------------------------------

    def start(self) -> AttachView:
        """Adopt the tree and take its first picture (tree, roles, first samples)."""
        from gpuscope.telemetry.sampler import RunSampler

        root = check_target(self.root_pid)
        self.started_ns = time.time_ns()
        if self.record:
            from gpuscope.attach import recording
            from gpuscope.procs.files import pid_path

            try:
                cwd: str | None = os.readlink(pid_path(self.root_pid, "cwd"))
            except OSError:
                cwd = None
            self.run_id, self.run_dir, _ = recording.open_run(self.root_pid, root.cmdline, None, cwd, self._store)
        self.watch.start()
        try:
            self.sampler = RunSampler(self.root_pid, self.interval_s, gpu=self._gpu,
                                      store=(self._store or True) if self.record else None,
                                      run_id=self.run_id or None)
        except ProcessLookupError:
            if self.run_dir is not None:            # the run opened above is closed, not left "running"
                from gpuscope.attach import recording

                recording.finish_run(self.run_id, self.run_dir, self.started_ns, [], {}, [], None, True,
                                     ["the process ended while attaching"], self._store)
            raise UserError(f"process {self.root_pid} ended while attaching") from None
        self.sampler.add_listener(self._on_batch)
        self.sampler.start()
        self._probe = threading.Thread(target=self._probe_roles, name="gpuscope-attach-roles", daemon=True)
        self._probe.start()
        self._first.wait(FIRST_PICTURE_S)
        return self.view()

    # -- the sampler's ticks (on its thread) -----------------------------------------------------

    def _on_batch(self, batch: SampleBatch) -> None:
        with self._lock:
            for started in batch.started:
                self._adopt(started.pid)
            assert self.sampler is not None
            self._summary = self.sampler.process_summary()
            for s in batch.processes:
                p = self._procs.get(s.pid)
                if p is None:
                    continue
                p.ppid, p.rss_bytes, p.gpu_mem_bytes = s.ppid, s.rss, s.gpu_mem
                p.state = _STATES.get(s.state or "", s.state or "unknown")
                p.alive = p.state not in ("zombie", "dead")     # a zombie has ended: it waits for its parent
                p.cpu_s = float(self._summary.get(s.pid, {}).get("cpu_seconds") or p.cpu_s)
            for pid in batch.ended:
                p = self._procs.get(pid)
                if p is not None:
                    p.alive, p.state = False, "ended"
            self.watch.observe(time.monotonic(), list(self._procs.values()), batch)
            if self._procs and not any(p.alive and p.state != "zombie" for p in self._procs.values()):
                self._ended.set()
        self._first.set()
        self._probe_wake.set()

    def _adopt(self, pid: int) -> None:
        info = read_proc(pid)
        if info is None:
            return
        parent = self._infos.get(info.ppid)
        prole = self._roles.get(info.ppid)
        role = roles.classify(info, (parent, prole) if parent is not None and prole is not None else None,
                              pid == self.root_pid)
        self._infos[pid], self._roles[pid] = info, role
        self._procs[pid] = AttachedProcess(pid, info.ppid, role.role, role.rank, info.cmdline, info.cpu_time,
                                           info.rss, None, _STATES.get(info.state, info.state), role.start_method,
                                           True, roles.is_python(info), info.start_ticks)

    # -- roles from stacks (its own thread) ------------------------------------------------------

    def _probe_roles(self) -> None:
        """Read once the stack of each child whose command line does not say what it runs."""
        from gpuscope.attach.stacks import read_tree

        shm_at = 0.0
        while not self._closing:
            self._probe_wake.wait(1.0)
            self._probe_wake.clear()
            now = time.monotonic()
            if now - shm_at >= SHM_EVERY_S:
                shm_at = now
                self._scan_shm()
            with self._lock:
                todo = {pid: (self._roles[pid].role, True) for pid, p in self._procs.items()
                        if p.alive and p.python and self._roles[pid].refinable and self._probe_due(pid, now)}
                for pid in todo:
                    self._probed[pid] = (self._probed.get(pid, (0, 0.0))[0] + 1, now)
            if todo and not self._closing:
                self._refine(read_tree(todo, root_pid=self.root_pid, nonblocking=self.nonblocking))

    def _scan_shm(self) -> None:
        with self._lock:
            pids = [pid for pid, p in self._procs.items() if p.alive and p.state != "zombie"]
        scratch = checks.Watch(self.root_pid)
        scratch.note_shm(pids)           # read outside the lock: maps of every process
        with self._lock:
            for path, pid in scratch.shm_refs.items():
                self.watch.shm_refs.setdefault(path, pid)

    def _last_probe(self) -> None:
        """Before the record is written: one more read of the children whose role is still
        unsettled (detached before the role probe got to them)."""
        from gpuscope.attach.stacks import read_tree

        with self._lock:
            todo = {pid: (self._roles[pid].role, True) for pid, p in self._procs.items()
                    if p.alive and p.python and self._roles[pid].refinable}
        if todo:
            self._refine(read_tree(todo, root_pid=self.root_pid, nonblocking=self.nonblocking))

    def _probe_due(self, pid: int, now: float) -> bool:
        """A child still starting (importing) shows no worker yet: read it again, a few times, slower."""
        count, last = self._probed.get(pid, (0, 0.0))
        return count < PROBES and now - last >= PROBE_AFTER_S * count

    def _refine(self, stacks: TreeStacks) -> None:
        with self._lock:
            for ps in stacks.processes:
                old = self._roles.get(ps.pid)
                if old is None or not ps.threads:
                    continue
                new = roles.refined(old, ps)
                self._roles[ps.pid] = new
                self._procs[ps.pid].role = new.role
                ps.role = new.role

    # -- what the user asks for --------------------------------------------------------------

    def take_stacks(self) -> TreeStacks:
        """Every live Python process's stacks now (grouped with findings.stacks.stack_groups)."""
        from gpuscope.attach.stacks import read_tree

        with self._lock:
            todo = {pid: (p.role, p.python) for pid, p in self._procs.items() if p.alive and p.state != "zombie"}
        got = read_tree(todo, root_pid=self.root_pid, nonblocking=self.nonblocking)
        self._refine(got)
        with self._lock:
            self._probed.update({p.pid: (PROBES, time.monotonic()) for p in got.processes if p.threads})
            self._stacks = got
            self.watch.stacks_read(time.monotonic(), got)
        return got

    def idle_s(self) -> float:
        with self._lock:
            return self.watch.idle_s(time.monotonic())

    def profile(self, seconds: float) -> Profile:
        """A CPU profile of the whole tree for ``seconds`` (speedscope JSON in the run folder)."""
        import tempfile

        from gpuscope.attach import profile

        folder = self.run_dir or tempfile.mkdtemp(prefix="gpuscope-attach-")
        with self._lock:
            role_of = {pid: p.role for pid, p in self._procs.items()}
        got = profile.record(self.root_pid, seconds, os.path.join(folder, "profile.speedscope.json"), role_of)
        with self._lock:
            got = profile.read(got.path, {pid: p.role for pid, p in self._procs.items()}, seconds) \
                if got.samples else got
            self._profile = got
        return got

    def findings(self) -> list[Finding]:
        from gpuscope.finding import merge

        with self._lock:
            procs = list(self._procs.values())
            root = self._procs.get(self.root_pid)
            alive = root is not None and root.alive and root.state != "zombie"
            return merge(self.watch.findings(time.monotonic(), procs, self._stacks, alive))

    def view(self) -> AttachView:
        """The tree now: processes (oldest first), findings, the last stacks and what was refused."""
        found = self.findings()
        with self._lock:
            procs = sorted(self._procs.values(), key=lambda p: (p.start_ticks, p.pid))
            stacks = self._stacks
            return AttachView(self.run_id, self.root_pid, [AttachedProcess(**vars(p)) for p in procs], found,
                              stacks, list(stacks.refused) if stacks is not None else [], self._ended.is_set(),
                              self._profile, list(self._notes))

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait_ended(self, timeout_s: float | None) -> bool:
        return self._ended.wait(timeout_s)

    def detach(self) -> AttachView:
        """Stop following (the job goes on untouched) and record what was seen."""
        if self._detached:
            return self.view()
        self._detached, self._closing = True, True
        self._probe_wake.set()
        if self.sampler is not None:
            self.sampler.stop(final_sample=False)
        if self._probe is not None:
            self._probe.join(timeout=15)
        self._last_probe()
        view = self.view()
        if not view.ended:
            self._notes.append("detached while the job still ran (gpuscope sent it nothing)")
            view.notes = list(self._notes)
        if self.record and self.run_dir is not None:
            from gpuscope.attach import recording

            with self._lock:
                summary = dict(self._summary)
            recording.finish_run(self.run_id, self.run_dir, self.started_ns, view.processes, summary,
                                 view.findings, view.stacks, view.ended, view.notes, self._store)
        return view


_STATES = {"R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop",
           "Z": "zombie", "X": "dead", "I": "idle"}
