"""Rule on what multiprocessing pickled to move between processes: ``large-pickles``.

Fires for >= 100 MB pickled over the run at >= 20 MB per second of it, or with one object of
>= 50 MB; a long job that ships a little at a time spends a negligible share of its time on it.

Reads the ``pickled`` counters of the event logs (``gpuscope/inject/pickwatch.py``: bytes
returned by ``ForkingPickler.dumps`` in each process, the number of calls, the largest object
and the seconds spent pickling). Every argument and result of a pool task, every ``Queue.put``
and ``Connection.send`` passes through it, and is unpickled once more on the other side.
"""

from __future__ import annotations

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.trace.events import ProcessEvents
from gpuscope.findings.registry import Input, RunInputs, rule

LARGE_BYTES = 100_000_000       # pickled in all over the run ...
MIN_RATE = 20_000_000           # ... at >= 20 MB per second of the run (a long job shipping a little
LARGE_OBJECT = 50_000_000       # at a time spends a negligible share on it), or one object >= 50 MB
MB = 1e6


def _span_s(events: list[ProcessEvents]) -> float:
    starts = [pe.start_ns for pe in events]
    ends = [pe.end_ns for pe in events if pe.end_ns is not None]
    return (max(ends) - min(starts)) / 1e9 if starts and ends and max(ends) > min(starts) else 0.0


def _tasks(events: list[ProcessEvents]) -> int:
    count = 0
    for pe in events:
        task_ids = [nid for nid, n in pe.names.items() if n.kind == "task"]
        if task_ids and pe.range_count:
            count += sum(c for nid, (c, _) in pe.range_totals().items() if nid in task_ids)
    return count


def large_pickles(events: list[ProcessEvents], threshold: float = LARGE_BYTES) -> list[Finding]:
    """More than ``threshold`` bytes pickled through pipes and queues in all, fast enough to matter
    (>= ``MIN_RATE`` per second of the run) or in one object of >= ``LARGE_OBJECT``."""
    rows = [(pe, pe.pickled) for pe in events if pe.pickled]
    total = sum(int(p.get("bytes", 0)) for _, p in rows)
    if total < threshold:
        return []
    seconds = sum(float(p.get("seconds", 0.0)) for _, p in rows)
    calls = sum(int(p.get("calls", 0)) for _, p in rows)
    largest = max(int(p.get("max_bytes", 0)) for _, p in rows)
    span = _span_s(events)
    if largest < LARGE_OBJECT and span > 0 and total / span < MIN_RATE:
        return []
    tasks = _tasks(events)
    rows.sort(key=lambda r: -int(r[1].get("bytes", 0)))
    top = [(pe, p) for pe, p in rows if int(p.get("bytes", 0)) >= total / 10]
    numbers = {"MB pickled": round(total / MB, 1), "s pickling": round(seconds, 3), "sends": calls,
               "largest MB": round(largest / MB, 1)}
    if span > 0:
        numbers["MB per s of run"] = round(total / MB / span, 1)
    if tasks:
        numbers["tasks"] = tasks
        numbers["MB per task"] = round(total / MB / tasks, 2)
    rate = f", {total / MB / span:.0f} MB/s" if span > 0 else ""
    per_task = f", {total / MB / tasks:.1f} MB per task" if tasks else ""
    return [Finding(
        "large-pickles",
        f"{total / MB:.0f} MB pickled through pipes and queues in {span:.1f} s{rate}{per_task} "
        f"({calls} sends, the largest {largest / MB:.1f} MB; {seconds:.1f} s inside pickle, and as much again "
        "to unpickle on the other side)",
        "move large arrays through shared memory instead of pickling them: multiprocessing.shared_memory "
        "(a numpy array over SharedMemory.buf; send only the name, shape and dtype), or a file / np.memmap; "
        "with fork, data set before the pool starts is inherited without pickling; return small results",
        Severity.WARNING, tuple(pe.pid for pe, _ in top),
        evidence(numbers, [f"{pe.role} {pe.pid}: {int(p.get('bytes', 0)) / MB:.1f} MB in {int(p.get('calls', 0))} "
                           f"sends" for pe, p in rows[:8]], [pe.pid for pe, _ in top]))]


@rule("large-pickles", inputs=Input.EVENTS, applies=lambda run: any(pe.pickled for pe in run.events),
      title="many bytes pickled through pipes and queues, fast enough to matter")
def _large_pickles(run: RunInputs) -> list[Finding]:
    return large_pickles(run.events)
