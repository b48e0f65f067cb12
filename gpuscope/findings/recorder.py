"""Findings while a run runs: a recorder (``gpuscope/runs/recorder.py``) fed by the run's lifecycle.

- ``on_output``: stderr scanned line by line (missing main guard, leaked shared memory, ...).
- ``on_batch``: the CPU sum of the run's processes (its mean over ``CPU_WINDOW_S``), their pids,
  and :class:`~gpuscope.findings.telemetry_rules.TelemetryWatch`'s per-process state.
- a watchdog thread, every ``POLL_S``: the new ``H``/``I`` lines of the event logs (fork children,
  roles, forks with threads, children's exit statuses), the logs' sizes (new ranges), the USS of
  fork children of big parents, and the telemetry rules (cow-lost, input-bound, cuda-contexts,
  idle-gpu-memory). "No progress": CPU near zero, no output and no log growth for
  ``stuck_after_s`` while processes live → ``no-progress`` with the stacks of every process
  (taken on the watchdog thread, never on the tick), and from those stacks
  ``rank-not-in-collective`` when ranks wait in a collective that another rank is not in.
- ``finish``: the after-run rules on the folder (with the OOM kills the cgroup counted since the
  start); everything is saved to ``findings.json`` and put in ``outcome.findings``.

Each new finding goes to ``on_finding`` once (the CLI prints a line, the app shows it).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from pathlib import Path
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from gpuscope.finding import Finding, Severity, evidence, merge, now_ns
from gpuscope.rundir import EVENTS
from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext

if TYPE_CHECKING:
    from gpuscope.trace.events import RunEvents
    from gpuscope.findings.output_rules import OutputScanner
    from gpuscope.findings.process_rules import ProcessFacts
    from gpuscope.findings.telemetry_rules import TelemetryWatch

OnFinding = Callable[[Finding], None]

POLL_S = 0.5
IDLE_CPU = 5.0          # % of one core, summed over the run's processes, averaged over CPU_WINDOW_S: "near zero"
CPU_WINDOW_S = 3.0      # a launcher polling its ranks (torchrun: a few jiffies a second) is idle, yet one jiffy
                        # in one 0.1 s tick reads as 10 %: the mean over a window is what says "busy"
STUCK_AFTER_S = 10.0

# Live findings whose set of processes grows as more of them qualify: one finding, updated in place
# (the listener sees the first; findings() and findings.json hold the latest).
GROWING = {"cow-lost", "idle-gpu-memory", "cuda-contexts", "input-bound"}


class FindingsRecorder(BaseRecorder):
    """Live findings of one run (thread-safe: ticks, output and finish come from three threads)."""

    name = "findings"

    def __init__(self, on_finding: OnFinding | None = None, *, stuck_after_s: float = STUCK_AFTER_S,
                 take_stacks: bool = True) -> None:
        self.on_finding = on_finding
        self.stuck_after_s = stuck_after_s
        self.take_stacks = take_stacks
        self.run_dir: str | None = None      # the run's folder
        self._scanner: OutputScanner | None = None
        self._facts: ProcessFacts | None = None
        self._telemetry: TelemetryWatch | None = None
        self._make_lock = threading.Lock()
        self._lock = threading.Lock()
        self._found: dict[tuple[str, tuple[int, ...]], Finding] = {}
        self._log_bytes = 0
        self._cpu = 0.0
        self._cpu_ticks: deque[tuple[int, float]] = deque()     # (t_ns, CPU % sum) within CPU_WINDOW_S
        self._cpu_window_sum = 0.0
        self._pids: list[int] = []
        self._stop = threading.Event()
        self._stop_requested = threading.Event()     # the run's: a stopping run is not stuck
        self._stop_seen_ns: int | None = None          # when a tick or the watchdog first saw it (monotonic)
        self._watchdog: threading.Thread | None = None
        self._last_progress = time.monotonic()
        self._stuck_reported = False
        self._main_exited = threading.Event()   # set by the run's event-log reader (RunEvents.on_first_exit)
        self._events: RunEvents | None = None
        self.ended = False
        self._oom_path: str | None = None
        self._oom_start: int | None = None

    # -- the rules' state, made on first use --------------------------------------------------------
    def _once(self, attr: str, make: Callable[[], Any]) -> Any:
        """``self.<attr>``, made by ``make()`` on first use, once, whichever thread asks first."""
        made = getattr(self, attr)
        if made is None:
            with self._make_lock:
                made = getattr(self, attr)
                if made is None:
                    made = make()
                    setattr(self, attr, made)
        return made

    @property
    def scanner(self) -> "OutputScanner":
        """The stderr scanner (output_rules)."""
        def make() -> "OutputScanner":
            from gpuscope.findings.output_rules import OutputScanner

            return OutputScanner()

        return self._once("_scanner", make)

    @property
    def facts(self) -> "ProcessFacts":
        """What the event logs' I lines said so far (process_rules)."""
        def make() -> "ProcessFacts":
            from gpuscope.findings.process_rules import ProcessFacts

            return ProcessFacts()

        return self._once("_facts", make)

    @property
    def telemetry(self) -> "TelemetryWatch":
        """The telemetry rules' per-process state (telemetry_rules)."""
        def make() -> "TelemetryWatch":
            from gpuscope.findings.telemetry_rules import TelemetryWatch

            return TelemetryWatch()

        return self._once("_telemetry", make)

    # -- lifecycle --------------------------------------------------------------------------------
    def prepare(self, launch: Launch) -> None:
        self.run_dir = launch.run_folder

    def started(self, ctx: RunContext) -> None:
        from gpuscope.findings import process_rules

        self.run_dir = ctx.run_folder
        self._events = ctx.events
        if ctx.events is not None:
            ctx.events.on_first_exit(self._main_exited.set)
        self._stop_requested = ctx.stop_requested
        self._last_progress = time.monotonic()
        self._oom_path = process_rules.memory_events_path()
        self._oom_start = process_rules.oom_kills(self._oom_path)
        self._watchdog = threading.Thread(target=self._watch, name="gpuscope-findings", daemon=True)
        self._watchdog.start()

    def on_output(self, stream: str, chunk: bytes) -> None:
        self._last_progress = time.monotonic()
        if stream != "stderr":
            return
        with self._lock:
            before = sum(h.count for h in self.scanner.hits.values())
            self.scanner.feed(chunk)
            changed = sum(h.count for h in self.scanner.hits.values()) != before
        if changed:
            self._report(self.scanner.findings())

    def on_batch(self, batch) -> None:
        """Per tick: the CPU sum (and its mean over ``CPU_WINDOW_S``), the live pids, and the telemetry
        rules' state (a few dict updates per process); the watchdog thread does the rest."""
        self._note_stop()
        cpu = 0.0
        for p in batch.processes:
            cpu += p.cpu or 0.0
        ticks = self._cpu_ticks
        ticks.append((batch.t_ns, cpu))
        self._cpu_window_sum += cpu
        while ticks and ticks[0][0] < batch.t_ns - CPU_WINDOW_S * 1e9:
            self._cpu_window_sum -= ticks.popleft()[1]
        self._cpu = mean = self._cpu_window_sum / len(ticks)
        self._pids = [p.pid for p in batch.processes]
        if mean > IDLE_CPU:
            self._last_progress = time.monotonic()
        try:
            self.telemetry.add(batch)      # cow-lost and the GPU rules: a few dict updates per process
        except Exception:  # noqa: BLE001 - a bad sample must not break the tick
            pass

    def _watch(self) -> None:
        """Every ``POLL_S``: new I lines and log growth; "looks stuck" once idle long enough."""
        engine: Any = None
        try:  # the after-run rules: loaded here, while the program runs, not after it
            from gpuscope.findings import engine
        except Exception:  # noqa: BLE001 - finish() imports it again and reports what is wrong
            pass
        rules_loaded = False
        while not self._stop.wait(POLL_S):
            self._note_stop()
            try:
                now = time.monotonic()
                if not rules_loaded and engine is not None:
                    rules_loaded = True   # the end imports only those whose inputs appeared since
                    engine.load_rules(self.run_dir)
                self._poll_logs(now)
                idle = now - self._last_progress
                if (not self._stuck_reported and self._pids and idle >= self.stuck_after_s
                        and not self._stop_requested.is_set() and not self._program_exited()):
                    self._stuck_reported = True
                    self._stuck(idle, self._cpu, list(self._pids))
            except Exception:  # noqa: BLE001 - the watchdog must outlive a bad read
                pass

    def _note_stop(self) -> None:
        """Remember when the stop was first seen: the SIGINT it sends closes task ranges about then."""
        if self._stop_seen_ns is None and self._stop_requested.is_set():
            self._stop_seen_ns = time.monotonic_ns()

    def _program_exited(self) -> bool:
        """The program's main process has ended, and what is left is a recorder finishing (nsys
        writing its report): not a stuck program (the run's event-log reader says so)."""
        return self._main_exited.is_set()

    def program_ended(self, ctx: RunContext) -> None:
        self.ended = True
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=10.0)

    def finish(self, outcome: Outcome) -> None:
        if self.run_dir is None:
            return
        from gpuscope.findings import engine  # not at import time: gpuscope run imports this module first

        with self._lock:
            self.scanner.finish()
        # the event logs as the event-log recorder read them (it finishes first), else read here
        events = outcome.events.processes() if outcome.events is not None else None
        self._note_stop()
        stop_ns = self._stop_seen_ns if outcome.stopped else None
        found = engine.analyse_events(self.run_dir, events, stopped=outcome.stopped, scanner=self.scanner,
                                      oom_killed=self._oom_killed(), facts=self._live_facts(), stop_ns=stop_ns)
        self._report(found + self._telemetry_findings())
        final = self.findings()
        engine.save(self.run_dir, final, {"stop_ns": stop_ns} if stop_ns is not None else None)
        outcome.findings = final

    def _live_facts(self) -> ProcessFacts | None:
        """The watchdog's scans of the logs, to go on from (None: none, or the watchdog still runs)."""
        watchdog = self._watchdog
        if watchdog is not None and watchdog.is_alive():
            return None
        return self._facts

    # -- state --------------------------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        with self._lock:
            if not self._found:      # the usual run: the findings model is not even imported
                return []

            return merge(self._found.values())

    def _report(self, findings: list[Finding]) -> None:
        if not findings:
            return

        new = []
        with self._lock:
            for f in findings:
                key = (f.code, f.pids)
                old = self._found.get(key)
                if old is None and f.code in GROWING:
                    # the same finding with more processes since (a second worker copied its pages too):
                    # it replaces the earlier one, which the listener has already shown
                    smaller = [k for k in self._found if k[0] == f.code and set(k[1]) < set(f.pids)]
                    if smaller:
                        first = min(self._found.pop(k).first_seen_ns or now_ns() for k in smaller)
                        self._found[key] = replace(f, first_seen_ns=min(first, f.first_seen_ns or first))
                        continue
                if old is None:
                    f = f if f.first_seen_ns is not None else _seen_now(f)
                    new.append(f)
                self._found[key] = merge([old, f])[0] if old is not None else f
        for f in new:
            if self.on_finding is not None:
                try:
                    self.on_finding(f)
                except Exception:  # noqa: BLE001 - a listener must not break the run
                    pass

    def _oom_killed(self) -> int:
        """OOM kills in the run's cgroup since it started (0 where unreadable)."""
        from gpuscope.findings import process_rules

        end = process_rules.oom_kills(self._oom_path)
        return max(0, end - self._oom_start) if end is not None and self._oom_start is not None else 0

    def _telemetry_findings(self) -> list[Finding]:
        if self._telemetry is None:   # no batch came (no sampler ran): the telemetry rules are not loaded
            return []
        try:
            return self.telemetry.findings(self.facts.forked, self.facts.roles)
        except Exception:  # noqa: BLE001
            return []

    def _poll_logs(self, now: float) -> None:
        """New I lines (forks with threads, child exits) and the logs' growth (ranges, marks)."""
        if self.run_dir is None:
            return
        from gpuscope.findings import process_rules

        events = os.path.join(self.run_dir, EVENTS)
        # the run's one event-log reader when the run gives it (RunContext.events), else the folder
        if process_rules.scan_info(self._events if self._events is not None else events, self.facts):
            self._report(process_rules.fork_with_threads(self.facts, self.facts.roles)
                         + process_rules.died_by_signal(self.facts, self.facts.roles, False))
        try:
            self.telemetry.read_uss(self.facts.forked, time.monotonic_ns())
        except Exception:  # noqa: BLE001
            pass
        self._report(self._telemetry_findings())
        size = _folder_bytes(events)
        if size != self._log_bytes:
            self._log_bytes = size
            self._last_progress = now

    def _stuck(self, idle_s: float, cpu: float, pids: list[int]) -> None:
        from gpuscope.fix import StopRun   # loaded with the finding that offers it, not with every run's rules

        seen = now_ns() - int(idle_s * 1e9)
        lines: list[str] = []
        ranks: list[Finding] = []
        if self.take_stacks and self.run_dir is not None:
            try:
                from gpuscope.findings import ddp_rules, stacks

                folder = Path(self.run_dir)
                procs = stacks.dump_processes(folder, stacks.roles_of(folder, pids), timeout_s=10.0)
                stacks.save_latest(folder, procs)
                lines = stacks.group(procs)
                ranks = ddp_rules.collective_mismatch(procs, ddp_rules.exited_ranks(self.run_dir), seen)
            except Exception as exc:  # noqa: BLE001 - the finding matters more than its stacks
                lines = [f"stacks unavailable: {type(exc).__name__}: {exc}"]
        self._report([Finding(
            "no-progress",
            f"looks stuck: {len(pids)} process(es) alive, CPU {cpu:.1f} % in all, and no output or new ranges "
            f"for {idle_s:.0f} s",
            "read the stacks (`gpuscope stacks --latest`): a lock inherited through fork, a pool waiting on a "
            "killed worker, or a collective one rank never joined; stop the run if it does not move",
            Severity.WARNING, (), evidence({"idle s": round(idle_s, 1), "cpu %": round(cpu, 2),
                                            "processes": len(pids)}, lines, pids), StopRun(), seen, "live")] + ranks)


def _seen_now(f: Finding) -> Finding:

    return replace(f, first_seen_ns=now_ns())


def _folder_bytes(folder: str) -> int:
    """Total size of the event logs (text and ranges): grows with every flushed range."""
    total = 0
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    total += entry.stat().st_size
                except OSError:
                    pass
    except OSError:
        pass
    return total
