"""Rules on pool workers' task ranges (kind ``task``, added by gpuscope around every pool/executor task).

Workers are grouped by parent (one pool per parent at a time, in practice). Per group:

- ``tasks-too-small``: median gap between a worker's consecutive tasks (pickling, IPC, scheduling)
  at least the median task, over >= 200 tasks: the pool spends more on moving tasks than on them;
  suggest ``chunksize`` so that one chunk's work is >= 4x the measured overhead.
- ``load-imbalance``: busy time (sum of task time) max/min > 1.5 across workers that ran tasks,
  with >= 0.5 s of work in all; or the pool waited > 25 % of its span for one straggler.
- ``startup-dominated``: spawn / forkserver workers (a fork worker's start costs next to nothing:
  a slow one is its initializer) spent > 50 % of their lifetimes before their first task, on
  average > 0.5 s each; a worker that ran no task at all counts with its whole life.

Task times come as int lists for small logs and numpy arrays for big ones
(``ProcessEvents.range_times``); each step below gives the same numbers either way
(``tests/runs/test_event_logs_small.py``), so a short run's findings need no numpy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.trace.events import ProcessEvents
from gpuscope.findings.registry import Input, OnStop, RunInputs, rule

if TYPE_CHECKING:
    from typing import Any, Sequence

MIN_TASKS = 200
IMBALANCE = 1.5
MIN_WORK_S = 0.5
STARTUP_SHARE = 0.5
STARTUP_MIN_S = 0.5
# a task range the stop's SIGINT closed ends this close to when the live recorder saw the stop (it
# sees the request a tick late at most, before the SIGINT reaches the tasks) ...
STOP_EARLY_NS, STOP_LATE_NS = 1_000_000_000, 10_000_000_000
# ... or, that time unknown (findings.json without it), this close before the main process's end
CUT_WINDOW_NS = 500_000_000


class Worker(NamedTuple):
    """One pool worker's task ranges."""

    pid: int
    ppid: int
    start_method: str | None
    t0: Any       # task starts in start order: an int list (small log) or an int64 array
    t1: Any
    start_ns: int
    end_ns: int
    killed: bool = False     # its log has no exit record: it ended by a signal it did not handle

    @property
    def busy_s(self) -> float:
        return float(_total(_spans(self.t0, self.t1))) / 1e9

    def busy_until_s(self, horizon_ns: int | None) -> float:
        """Busy time up to ``horizon_ns`` (None: all of it)."""
        if horizon_ns is None:
            return self.busy_s
        if isinstance(self.t0, list):
            return sum(max(0, min(b, horizon_ns) - a) for a, b in zip(self.t0, self.t1)) / 1e9
        import numpy as np

        return float(np.clip(np.minimum(self.t1, horizon_ns) - self.t0, 0, None).sum()) / 1e9


# -- the same arithmetic on int lists and on numpy arrays ------------------------------------------------

def _spans(t0: Any, t1: Any) -> Any:
    """t1 - t0 per task."""
    return [b - a for a, b in zip(t0, t1)] if isinstance(t0, list) else t1 - t0


def _gaps(t0: Any, t1: Any) -> Any:
    """From the end of a task to the start of the worker's next one."""
    return [a - b for a, b in zip(t0[1:], t1)] if isinstance(t0, list) else t0[1:] - t1[:-1]


def _total(values: Any) -> int:
    return sum(values) if isinstance(values, list) else int(values.sum())


def _concat(parts: Sequence[Any]) -> Any:
    """One list when every part is a list, else one int64 array."""
    if all(isinstance(p, list) for p in parts):
        return [v for p in parts for v in p]
    import numpy as np

    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts] or [np.zeros(0, np.int64)])


def _median(values: Any) -> float:
    if isinstance(values, list):   # statistics.median's value; statistics imports decimal, fractions, random
        ordered, half = sorted(values), len(values) // 2
        return float(ordered[half]) if len(values) % 2 else (ordered[half - 1] + ordered[half]) / 2
    import numpy as np

    return float(np.median(values))


def _first(t0: Any) -> int:
    return min(t0) if isinstance(t0, list) else int(t0.min())


def _last(t1: Any) -> int:
    return max(t1) if isinstance(t1, list) else int(t1.max())


def workers(events: list[ProcessEvents], stop_ns: int | None = None) -> dict[int, list[Worker]]:
    """Pool workers grouped by parent pid: those that ran tasks, and those that ended without one
    (empty ``t0``/``t1``: a spawn worker still starting when its siblings had done every task).
    ``stop_ns``: when a stopped run's stop was seen (:func:`_with_cut_task`)."""
    groups: dict[int, list[Worker]] = {}
    for pe in events:
        if pe.role != "pool worker":
            continue
        task_ids = [nid for nid, n in pe.names.items() if n.kind == "task"]
        t0: Any = []
        t1: Any = []
        if task_ids and pe.range_count:   # every range a task (the usual case) needs no selection
            t0, t1 = pe.range_times(None if len(task_ids) == len(pe.names) else task_ids)
        t0, t1 = _with_cut_task(pe, t0, t1, stop_ns)
        if len(t0):
            end = pe.end_ns if pe.end_ns is not None else max(_last(t1), pe.range_end() or pe.start_ns)
        elif pe.end_ns is not None:
            end, t0, t1 = pe.end_ns, [], []
        else:
            continue
        groups.setdefault(int(pe.ppid or 0), []).append(
            Worker(pe.pid, int(pe.ppid or 0), pe.start_method, t0, t1, pe.start_ns, end, pe.exit is None))
    return groups


def _with_cut_task(pe: ProcessEvents, t0: Any, t1: Any, stop_ns: int | None = None) -> tuple[Any, Any]:
    """The task ranges plus the task a stop or a crash cut: the worker took it (its last ``T`` line
    comes after its last range's start) and ended in it, so it counts up to its exit record or, a
    worker killed without one on a stopped run (the pool's terminate()), up to the stop: it was in
    that task then, and what it did until the signal reached it is not known."""
    end = pe.end_ns if pe.end_ns is not None else stop_ns
    if not pe.tasks or end is None:
        return t0, t1
    taken = max(t for t, *_ in pe.tasks)
    if (len(t0) and taken <= _last(t0)) or end <= taken:
        return t0, t1
    if isinstance(t0, list):
        return [*t0, taken], [*t1, end]
    import numpy as np

    return np.append(t0, taken), np.append(t1, end)


def tasks_too_small(group: list[Worker]) -> Finding | None:
    n = sum(len(w.t0) for w in group)
    if n < MIN_TASKS:
        return None
    durations = _concat([_spans(w.t0, w.t1) for w in group])
    gaps = _concat([_gaps(w.t0, w.t1) for w in group if len(w.t0) > 1])
    if not len(gaps):
        return None
    task_ns, gap_ns = _median(durations), _median(gaps)
    if gap_ns < max(task_ns, 1.0):
        return None
    chunk = max(2, math.ceil(4 * gap_ns / max(task_ns, 1.0)))
    chunk = min(chunk, max(2, n // (4 * len(group))))
    share = float(_total(durations)) / max(1.0, float(_total(durations) + _total(gaps)))
    pids = tuple(sorted(w.pid for w in group))
    return Finding(
        "tasks-too-small",
        f"{n} tasks took {task_ns / 1e3:.0f} µs each (median) but {gap_ns / 1e3:.0f} µs passed between two tasks "
        f"of a worker: the pool spent {100 * (1 - share):.0f} % of the workers' time moving tasks, not running them",
        f"pass chunksize={chunk} to map/imap (or batch the work inside each task): one chunk then holds about "
        f"4x the measured per-task overhead of work", Severity.WARNING, pids,
        evidence({"tasks": n, "median task µs": round(task_ns / 1e3, 1), "median gap µs": round(gap_ns / 1e3, 1),
                  "busy share": round(share, 3), "suggested chunksize": chunk}, (), pids))


def load_imbalance(group: list[Worker], stopped: bool = False, stop_ns: int | None = None,
                   main_end_ns: int | None = None) -> Finding | None:
    """On a stopped run (``stop_ns``: when the stop was seen; ``main_end_ns``: when its main process
    ended), the wait for the last worker is
    no evidence (the stop ended them all), and when no task range was closed by the stop (the
    workers ignore SIGINT, the parent's terminate() killed them), what a worker killed without its
    exit record did after its last range is unknown: busy times count up to the earliest such end."""
    if len(group) < 2:
        return None
    killed = [w for w in group if w.killed] if stopped and not _closed_by_stop(group, stop_ns, main_end_ns) else []
    horizon = min(_last(w.t1) for w in killed) if killed else None
    busy = {w.pid: w.busy_until_s(horizon) for w in group}
    total = sum(busy.values())
    if total < MIN_WORK_S:
        return None
    lo, hi = min(busy.values()), max(busy.values())
    ratio = hi / lo if lo > 0 else math.inf
    last_ends = sorted(_last(w.t1) for w in group)
    span = last_ends[-1] - min(_first(w.t0) for w in group)
    tail = (last_ends[-1] - last_ends[-2]) / span if span > 0 and not stopped else 0.0
    if ratio <= IMBALANCE and not (tail > 0.25 and (last_ends[-1] - last_ends[-2]) > 0.5e9):
        return None
    pids = tuple(sorted(busy))
    slow = max(busy, key=lambda p: busy[p])
    return Finding(
        "load-imbalance",
        f"pool workers were unevenly loaded: busiest {hi:.2f} s (pid {slow}), least busy {lo:.2f} s "
        f"(ratio {ratio:.1f}); the pool waited {tail * 100:.0f} % of its span for the last worker",
        "use a smaller chunksize (or imap_unordered) so work is handed out as workers free up; split the "
        "largest tasks", Severity.WARNING, pids,
        evidence({"busy max s": round(hi, 3), "busy min s": round(lo, 3), "ratio": round(min(ratio, 1e6), 2),
                  "tail share": round(tail, 3)}, [f"pid {p}: busy {b:.3f} s" for p, b in sorted(busy.items())],
                 pids))


def _closed_by_stop(group: list[Worker], stop_ns: int | None, main_end_ns: int | None) -> bool:
    """Whether a task range ended at the stop: the stop's SIGINT reached the tasks (a busy worker's
    range ends then; one without a range then was idle)."""
    if stop_ns is not None:
        return any(stop_ns - STOP_EARLY_NS <= _last(w.t1) <= stop_ns + STOP_LATE_NS for w in group)
    return main_end_ns is not None and any(main_end_ns - CUT_WINDOW_NS <= _last(w.t1) <= main_end_ns for w in group)


def startup_dominated(group: list[Worker]) -> Finding | None:
    """``group``: the pool's workers, those that ran no task included (all their life was start-up:
    the others had done the work before they were ready)."""
    method = group[0].start_method or "default"
    if len(group) < 2 or method not in ("spawn", "forkserver"):
        return None
    startup = [max(0, (_first(w.t0) if len(w.t0) else w.end_ns) - w.start_ns) / 1e9 for w in group]
    life = [max(1, w.end_ns - w.start_ns) / 1e9 for w in group]
    share = sum(startup) / sum(life)
    mean = sum(startup) / len(startup)
    if share <= STARTUP_SHARE or mean <= STARTUP_MIN_S:
        return None
    pids = tuple(sorted(w.pid for w in group))
    from gpuscope.fix import SetStartMethod   # loaded with the finding that offers it, not with every run's rules
    action = SetStartMethod("forkserver") if method == "spawn" else None
    return Finding(
        "startup-dominated",
        f"pool workers spent {share * 100:.0f} % of their lives starting ({mean:.2f} s each on average before "
        f"their first task, start method {method})",
        "keep one pool for the whole program instead of one per step; with spawn, move heavy imports out of "
        "the module the workers re-import, or use forkserver with set_forkserver_preload", Severity.WARNING, pids,
        evidence({"workers": len(group), "workers without a task": sum(1 for w in group if not len(w.t0)),
                  "mean start-up s": round(mean, 3), "start-up share": round(share, 3)},
                 (), pids), action)


# -- the rules' declarations ----------------------------------------------------------------------

def _has_pool(run: RunInputs) -> bool:
    return run.has_role("pool worker")


def _pools(run: RunInputs) -> dict[int, list[Worker]]:
    """The run's pools (:func:`workers`), read once for the three rules."""
    return run.once("pool_rules.workers", lambda: workers(run.events, run.stop_ns if run.stopped else None))


def _groups(run: RunInputs) -> list[list[Worker]]:
    """Each pool's workers that ran tasks (cut ones included: :func:`workers`)."""
    return [busy for _, group in sorted(_pools(run).items()) if (busy := [w for w in group if len(w.t0)])]


def _too_small(run: RunInputs) -> list[Finding | None]:
    """tasks-too-small per pool of :func:`_groups`, once (load-imbalance defers to it)."""
    return run.once("pool_rules.too_small", lambda: [tasks_too_small(g) for g in _groups(run)])


@rule("tasks-too-small", inputs=Input.EVENTS, applies=_has_pool,
      title="pool tasks so short that moving them costs more than running them")
def _tasks_too_small(run: RunInputs) -> list[Finding]:
    return [f for f in _too_small(run) if f is not None]


@rule("load-imbalance", inputs=Input.EVENTS, applies=_has_pool, on_stop=OnStop.SAY,
      title="pool workers unevenly loaded, or the pool waited for one straggler")
def _load_imbalance(run: RunInputs) -> list[Finding]:
    # with tasks too small, "busy" is mostly overhead and who got them is chance: one finding, one fix
    main = next((pe for pe in run.events if pe.role in ("main", "torchrun agent")), None)
    main_end = main.end_ns if main is not None else None
    return [f for g, small in zip(_groups(run), _too_small(run)) if small is None
            and (f := load_imbalance(g, run.stopped, run.stop_ns, main_end)) is not None]


@rule("startup-dominated", inputs=Input.EVENTS, applies=_has_pool, on_stop=OnStop.SAY,
      title="spawn/forkserver pool workers spent most of their lives starting")
def _startup_dominated(run: RunInputs) -> list[Finding]:
    groups = [g for _, g in sorted(_pools(run).items()) if any(len(w.t0) for w in g)]
    return [f for g in groups if (f := startup_dominated(g)) is not None]
