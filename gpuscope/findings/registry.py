"""The findings rules in one table: each rule's id, the inputs it reads, its phase, its check.

A rule module (``gpuscope/findings/*_rules.py``, found by name) declares its rules when it is
imported::

    @rule("load-imbalance", inputs={Input.EVENTS}, phase=Phase.AFTER, on_stop=OnStop.SAY,
          title="pool workers unevenly loaded", applies=lambda run: run.has_role("pool worker"))
    def load_imbalance(run: RunInputs) -> list[Finding]: ...

Rules that a live watcher decides (the recorder's watchdog, the telemetry watch, the stderr
scanner) are declared with :func:`declare`, without a check: the table still names them, their
inputs and phase for the CLI (``gpuscope findings --rules``), the app and docs/FINDINGS.md.
The engine runs every ``AFTER`` rule's check through :func:`run_after`.
"""

from __future__ import annotations

import enum
import importlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

from gpuscope import rundir
from gpuscope.finding import Finding, Severity, evidence, replace

if TYPE_CHECKING:
    from gpuscope.findings.output_rules import OutputScanner
    from gpuscope.findings.process_rules import ProcessFacts
    from gpuscope.runrecord import RunRecord
    from gpuscope.trace.events import ProcessEvents


class Phase(enum.Enum):
    """When a rule can decide: before the program starts, while it runs, or on the finished run."""

    BEFORE = "before"
    LIVE = "live"
    AFTER = "after"


class Input(enum.Enum):
    """What a rule reads."""

    SPEC = "spec"              # the run's settings (RunSpec)
    EVENTS = "events"          # the injected hook's event logs (docs/EVENTS.md)
    OUTPUT = "output"          # the program's stderr
    TELEMETRY = "telemetry"    # sampled CPU, memory, GPU per process
    SUMMARY = "summary"        # the run's summary (exit status, processes left running)
    NSYS = "nsys"              # an nsys export and its diagnostics
    STACKS = "stacks"          # Python stacks taken while it runs
    PROCS = "procs"            # the live processes (/proc, /dev/shm)
    TORCH = "torch"            # the run's PyTorch profiler traces


class OnStop(enum.Enum):
    """What a rule does on a run the user stopped (Ctrl-C, Stop)."""

    KEEP = "keep"        # its evidence is whole up to the stop
    SAY = "say"          # a stop can distort it: the finding says the run was stopped
    SILENT = "silent"    # a stop makes it meaningless: no finding


@dataclass
class RunInputs:
    """Everything an after-run check may read, gathered once by the engine."""

    run_dir: str
    events: list[ProcessEvents] = field(default_factory=list)
    output: list[Finding] = field(default_factory=list)      # the stderr rules' findings
    record: RunRecord | None = None          # the finished run's record (None: the live recorder's end)
    facts: ProcessFacts | None = None
    scanner: OutputScanner | None = None
    stopped: bool = False        # stopped by the user (Ctrl-C, Stop)
    oom_killed: int = 0
    stop_ns: int | None = None   # when the live recorder saw the stop requested (CLOCK_MONOTONIC)
    _made: dict[str, Any] = field(default_factory=dict, repr=False)

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()``'s value, made once per run for every rule that asks (several rules, one reading)."""
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    @property
    def roles(self) -> dict[int, str]:
        return {pe.pid: pe.role for pe in self.events}

    def has_role(self, role: str) -> bool:
        return any(pe.role == role for pe in self.events)

    @property
    def export(self) -> str | None:
        """The run folder's nsys export (``.sqlite`` first), or None."""
        return rundir.find_export(self.run_dir)


Check = Callable[[RunInputs], "list[Finding]"]


class Rule(NamedTuple):
    """One rule: ``id`` (unique; the code of its findings unless ``codes`` names others), what it
    reads, when it decides, what a stop does to it, and its check."""

    id: str
    inputs: frozenset[Input]
    phases: frozenset[Phase]
    title: str
    codes: tuple[str, ...] = ()              # the finding codes it emits, when not just ``id``
    on_stop: OnStop = OnStop.KEEP
    check: Check | None = None
    applies: Callable[[RunInputs], bool] | None = None   # a cheap test before the check
    module: str = ""
    supersedes: tuple[str, ...] = ()        # codes its findings make redundant for the same processes

    @property
    def emits(self) -> tuple[str, ...]:
        """The codes of the findings it makes."""
        return self.codes or (self.id,)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "codes": list(self.emits), "title": self.title,
                "inputs": sorted(i.value for i in self.inputs),
                "phases": [p.value for p in Phase if p in self.phases], "on_stop": self.on_stop.value,
                "module": self.module}


_RULES: dict[str, Rule] = {}
_loaded = False


def _as_set(value: Any, kind: type[enum.Enum]) -> frozenset[Any]:
    items = [value] if isinstance(value, kind) else list(value)
    return frozenset(kind(v) for v in items)


def declare(rule_id: str, *, inputs: Iterable[Input] | Input, phase: Iterable[Phase] | Phase, title: str,
            codes: Iterable[str] = (), on_stop: OnStop = OnStop.KEEP, check: Check | None = None,
            applies: Callable[[RunInputs], bool] | None = None, module: str = "",
            supersedes: Iterable[str] = ()) -> Rule:
    """Add a rule to the table (a second declaration of an id from the same module replaces the
    first, as a reload does; from another module it is an error: ids are unique)."""
    if not module:   # where it is declared: the check's module, else the caller's
        module = getattr(check, "__module__", "") if check is not None else sys._getframe(1).f_globals["__name__"]
    made = Rule(rule_id, _as_set(inputs, Input), _as_set(phase, Phase), title, tuple(codes), on_stop, check,
                applies, module, tuple(supersedes))
    if check is not None and Phase.AFTER not in made.phases:
        raise ValueError(f"rule {rule_id}: a check runs after the run; declare Phase.AFTER")
    old = _RULES.get(rule_id)
    if old is not None and old.module != made.module:
        raise ValueError(f"rule {rule_id} is declared twice ({old.module}, {made.module})")
    _RULES[rule_id] = made
    return made


def rule(rule_id: str, *, inputs: Iterable[Input] | Input, phase: Iterable[Phase] | Phase = Phase.AFTER,
         title: str, codes: Iterable[str] = (), on_stop: OnStop = OnStop.KEEP,
         applies: Callable[[RunInputs], bool] | None = None,
         supersedes: Iterable[str] = ()) -> Callable[[Check], Check]:
    """Decorator: declare ``check`` as the after-run check of ``rule_id``."""
    def add(check: Check) -> Check:
        declare(rule_id, inputs=inputs, phase=phase, title=title, codes=codes, on_stop=on_stop, check=check,
                applies=applies, supersedes=supersedes)
        return check
    return add


def rule_modules() -> list[str]:
    """Every ``gpuscope.findings.*_rules`` module, by name (other parts add theirs as new files)."""
    import pkgutil   # the CLI's and app's full table only: a run's end goes by AFTER_INDEX

    here = os.path.dirname(__file__)
    return sorted(f"{__package__}.{m.name}" for m in pkgutil.iter_modules([here]) if m.name.endswith("_rules"))


def load() -> None:
    """Import every rule module once (each declares its rules); a broken one is skipped and reported
    as an ``E`` finding by :func:`run_after`, never as the loss of every other rule."""
    global _loaded
    if _loaded:
        return
    for name in rule_modules():
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - one broken rule module must not hide the others
            _broken[name] = f"{type(exc).__name__}: {exc}"
    _loaded = True


_broken: dict[str, str] = {}

# Every after-run check: rule id -> (its module in this package, the inputs it reads), so that the
# end of a run imports only the modules whose inputs the run has (tests/findings/test_registry.py
# holds it equal to what the modules declare).
AFTER_INDEX: dict[str, tuple[str, str]] = {
    "child-died-by-signal": ("process_rules", "events output procs"),
    "cuda-after-fork": ("torch_rules", "events output"),
    "cuda-fork-message": ("output_rules", "output"),
    "executor-worker-killed": ("output_rules", "output"),
    "first-process-died": ("summary_rules", "events summary"),
    "fork-with-threads": ("process_rules", "events"),
    "gpu-launch-bound": ("gpu_rules", "events nsys"),
    "gpu-time-sliced": ("gpu_rules", "events nsys"),
    "large-pickles": ("ipc_rules", "events"),
    "leaked-semaphore": ("output_rules", "output"),
    "leaked-shm": ("output_rules", "output"),
    "left-running": ("summary_rules", "procs summary"),
    "load-imbalance": ("pool_rules", "events"),
    "missing-main-guard": ("output_rules", "output"),
    "nsys-diagnostics": ("summary_rules", "nsys summary"),
    "pageable-copies": ("gpu_rules", "events nsys"),
    "ray-object-store": ("ray_rules", "telemetry"),
    "sampler-epoch-not-set": ("torch_rules", "events"),
    "shm-left-behind": ("shm_rules", "events procs"),
    "spawn-main-reimport": ("startup_rules", "events"),
    "startup-dominated": ("pool_rules", "events"),
    "straggler-rank": ("ddp_rules", "events"),
    "tasks-too-small": ("pool_rules", "events"),
    "torch-collective-wait": ("torch_ops_rules", "torch"),
    "torch-dataloader-wait": ("torch_ops_rules", "torch"),
    "torch-launch-bound": ("torch_ops_rules", "torch"),
    "torch-slow-rank": ("torch_ops_rules", "torch"),
    "torch-sync-in-step": ("torch_ops_rules", "torch"),
}
TORCH_DIR = "torch"                   # as gpuscope.torchtrace.run names the run's trace folder
TORCH_LOST_NOTE = "torch profiler:"   # and the run's note of a process that lost its trace


def has_input(run: RunInputs, what: Input) -> bool:
    """Whether the run has ``what`` to read: an nsys export (or nsys results in its record), torch
    traces (or notes of lost ones); every other input every run has."""
    if what is Input.NSYS:
        return run.export is not None or (run.record is not None and run.record.nsys is not None)
    if what is Input.TORCH:
        return os.path.isdir(os.path.join(run.run_dir, TORCH_DIR)) or _torch_in_summary(run.run_dir)
    return True


def _torch_in_summary(run_dir: str) -> bool:
    try:
        with open(os.path.join(run_dir, rundir.SUMMARY), encoding="utf-8") as fh:
            summary = json.load(fh)
        notes = summary.get("notes") or ()
        return bool(summary.get("torch_traces")) or any(str(n).startswith(TORCH_LOST_NOTE) for n in notes)
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def load_after(run: RunInputs) -> None:
    """Import the rule modules of the after-run checks that ``run`` has the inputs for (all of them
    once :func:`load` ran); a broken one is reported as by :func:`load`."""
    if _loaded:
        return
    wanted = {module for module, inputs in AFTER_INDEX.values()
              if all(has_input(run, Input(name)) for name in inputs.split())}
    for module in sorted(wanted):
        name = f"{__package__}.{module}"
        if name in sys.modules or name in _broken:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - one broken rule module must not hide the others
            _broken[name] = f"{type(exc).__name__}: {exc}"


def rules(phase: Phase | None = None) -> list[Rule]:
    """The declared rules (of ``phase``), by id."""
    load()
    return sorted((r for r in _RULES.values() if phase is None or phase in r.phases), key=lambda r: r.id)


def get(code: str) -> Rule | None:
    """The rule named ``code``, else the first (by id) that emits it."""
    load()
    found = _RULES.get(code)
    return found if found is not None else next((r for r in rules() if code in r.emits), None)


STOPPED_NOTE = "the run was stopped before it ended: ranges cut by the stop count up to it"


def on_stopped(rule_: Rule, found: list[Finding]) -> list[Finding]:
    """What a stop does to a rule's findings (its ``on_stop``)."""
    if rule_.on_stop is OnStop.SILENT:
        return []
    if rule_.on_stop is OnStop.SAY:
        return [replace(f, title=f"{f.title} ({STOPPED_NOTE})",
                        evidence=f.evidence._replace(excerpts=(*f.evidence.excerpts, STOPPED_NOTE)))
                for f in found]
    return found


def run_after(run: RunInputs) -> list[Finding]:
    """Every after-run check whose ``applies`` holds (of the modules :func:`load_after` imports, and
    any other rule declared); a check that fails becomes one info finding."""
    out: list[Finding] = []
    covered: list[tuple[str, set[int]]] = []       # (code made redundant, for these processes)
    load_after(run)
    for r in sorted((r for r in _RULES.values() if Phase.AFTER in r.phases), key=lambda r: r.id):
        if r.check is None:
            continue
        try:
            if r.applies is not None and not r.applies(run):
                continue
            found = r.check(run)
        except Exception as exc:  # noqa: BLE001 - one failing rule must not cost the others
            out.append(_failed(r.id, f"{type(exc).__name__}: {exc}"))
            continue
        found = on_stopped(r, found) if run.stopped else found
        covered += [(code, set(f.pids)) for f in found for code in r.supersedes]
        out += found
    out = [f for f in out if not any(f.code == code and f.pids and set(f.pids) <= pids for code, pids in covered)]
    out += [_failed(name, why) for name, why in sorted(_broken.items())]
    return out


def _failed(what: str, why: str) -> Finding:
    return Finding("rule-failed", f"gpuscope's rule {what} could not run: {why}",
                   "report it to gpuscope's maintainers with the run folder", Severity.INFO,
                   evidence=evidence({}, [why]))
