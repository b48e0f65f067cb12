"""A run's wall time cut into consecutive parts, so that a comparison can say where a difference goes.

The parts follow the path to the first task and on to the run's end (docs/COMPARE.md, "Where the
wall time goes"): the main program's start, its own work before it starts a worker, starting the
worker processes, the first-task worker's interpreter, gpuscope's hook in it, its re-import of
``__main__`` (spawn, forkserver; fork: its bootstrap), its set-up until the first task, the tasks,
the main program after the last task, and the run's finish. Consecutive boundaries make the parts
add up to the wall time; a boundary the logs do not hold gives its time to the next part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from gpuscope.analysis.process_times import bootstrap, first_task, hook_before, hook_span, task_ends

if TYPE_CHECKING:
    from gpuscope.trace.events import ProcessEvents


@dataclass(frozen=True)
class PartDef:
    """One part of a run's wall time, as the breakdown and the verdict name it."""

    name: str      # stable: the key in `compare --json`'s breakdown
    title: str     # for a table's first column
    phrase: str    # as the verdict says it


PARTS: tuple[PartDef, ...] = (
    PartDef("launch", "Main program's start", "the main program's start (interpreter, gpuscope's hook)"),
    PartDef("main", "Main program (no task to cut at)", "the main program (its logs hold no task to cut it at)"),
    PartDef("main_before_workers", "Main program before 1st worker",
            "the main program's own work before its first worker (its imports, set-up)"),
    PartDef("process_start", "Starting the worker processes",
            "starting the worker processes (start(): creating them, pickling their arguments)"),
    PartDef("interpreter", "Worker interpreter start-up", "the worker's interpreter start-up"),
    PartDef("hook", "gpuscope's hook in the worker", "gpuscope's hook in the worker"),
    PartDef("main_reimport", "Worker re-importing __main__", "re-importing __main__ in the worker"),
    PartDef("to_first_task", "Worker set-up to its first task",
            "the worker's set-up until its first task (initializer, receiving the task)"),
    PartDef("tasks", "The tasks", "the tasks"),
    PartDef("after_tasks", "Main program after last task",
            "the main program after the last task (pool shut-down, its exit)"),
    PartDef("finish", "The run's finish", "the run's finish after the main program (other processes' exit)"),
)
PART_BY_NAME = {p.name: p for p in PARTS}
FORK_REIMPORT_PHRASE = "the worker's bootstrap (fork re-imports nothing)"


@dataclass(frozen=True)
class CriticalPath:
    """The monotonic times (ns) the parts lie between; None where the logs do not tell."""

    root: "ProcessEvents"
    first_start_call: int | None = None     # the first Process.start() call of the run
    worker_created: int | None = None       # start() returned for the first-task worker
    hook_start: int | None = None           # its gpuscope hook began (a fresh interpreter)
    ready: int | None = None                # its interpreter is ready
    bootstrap: int | None = None            # multiprocessing's bootstrap began in it
    first_task: int | None = None           # the first task (or worker range) began
    last_task_end: int | None = None        # the last task (or worker range) ended


def wall_parts(path: CriticalPath, started_ns: int | None, ended_ns: int | None) -> dict[str, float]:
    """Part name -> ms; empty without the run's start and end. The parts add up to the wall time."""
    if started_ns is None or ended_ns is None:
        return {}
    root = path.root
    to_wall = root.wall_ns   # every process shares the monotonic clock: one anchor converts them all
    main_start = root.start_ns - hook_before(root)
    main_end = root.end_ns
    marks: list[tuple[str, int | None]] = [("launch", to_wall(main_start))]
    if path.first_task is None:   # no worker ran a task or a range: the main program is one part
        marks += [("main", _wall(to_wall, main_end)), ("finish", ended_ns)]
    else:
        marks += _task_marks(path, to_wall, main_end) + [("finish", ended_ns)]
    out: dict[str, float] = {}
    prev = started_ns
    for name, t in marks:
        if t is None:
            out[name] = 0.0   # not in the logs: its time goes to the next part
            continue
        t = min(max(t, prev), ended_ns)   # clocks read moments apart never make a part negative
        out[name] = (t - prev) / 1e6
        prev = t
    return out


def _task_marks(path: CriticalPath, to_wall: Callable[[int], int],
                main_end: int | None) -> list[tuple[str, int | None]]:
    """The boundaries from the main program's start to its end, through the first-task worker."""
    return [
        ("main_before_workers", _wall(to_wall, path.first_start_call)),
        ("process_start", _wall(to_wall, path.worker_created)),
        ("interpreter", _wall(to_wall, path.hook_start if path.hook_start is not None else path.ready)),
        ("hook", _wall(to_wall, path.ready if path.hook_start is not None else None)),
        ("main_reimport", _wall(to_wall, path.bootstrap)),
        ("to_first_task", _wall(to_wall, path.first_task)),
        ("tasks", _wall(to_wall, path.last_task_end)),
        ("after_tasks", _wall(to_wall, main_end)),
    ]


def _wall(to_wall: Callable[[int], int], mono: int | None) -> int | None:
    return None if mono is None else to_wall(mono)


def critical_path(logs: list[ProcessEvents], root: ProcessEvents, refs: dict[int, tuple[int, int | None, str]],
                  workers: list[ProcessEvents]) -> tuple[CriticalPath, ProcessEvents | None]:
    """The boundaries of the path to the first task and on to the end, and the worker that ran that task."""
    calls = [t_call for pe in logs for t_call, *_ in pe.children]
    firsts = [(t, pe) for pe in workers if (t := first_task(pe)) is not None]
    ends = [int(t1.max()) for pe in workers if len(t1 := task_ends(pe))]
    if not firsts:   # no pool tasks: the first and last range a worker ran
        firsts = [(int(pe.ranges["t0"].min()), pe) for pe in workers if len(pe.ranges)]
        ends = [int(pe.ranges["t1"].max()) for pe in workers if len(pe.ranges)]
    if not firsts:
        return CriticalPath(root, first_start_call=min(calls) if calls else None), None
    first, pe = min(firsts, key=lambda tp: tp[0])
    hook_start, ready = hook_span(pe)
    return CriticalPath(root, first_start_call=min(calls) if calls else None, worker_created=refs[pe.pid][1],
                        hook_start=hook_start, ready=ready, bootstrap=bootstrap(pe), first_task=first,
                        last_task_end=max(ends) if ends else None), pe
