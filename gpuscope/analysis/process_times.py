"""When things happened in one process, read from its event log: gpuscope's hook in a fresh
interpreter, the interpreter ready, multiprocessing's bootstrap (after a spawn child re-imported
``__main__``), its first and last pool task, and what the re-import imported (the hook's ``U`` line).
All times are on the monotonic clock every process shares, in ns."""

from __future__ import annotations

import numpy as np

from gpuscope.trace.events import ProcessEvents


def hook_before(pe: ProcessEvents) -> int:
    """The part of gpuscope's hook that ran before the log's anchor (its start time), in ns."""
    value = pe.info.get("hook_before_anchor_ns")
    return value if isinstance(value, int) and value > 0 else 0


def task_ids(pe: ProcessEvents) -> list[int]:
    return [nid for nid, n in pe.names.items() if n.kind == "task"]


def hook_span(pe: ProcessEvents) -> tuple[int | None, int]:
    """(when gpuscope's hook began in a fresh interpreter, or None; when the interpreter was ready)."""
    start = pe.start_ns - hook_before(pe)
    hook = pe.info.get("hook_ns")
    if isinstance(hook, int) and hook > 0:   # a fresh interpreter ran gpuscope's hook first: its own segment
        return start, start + hook
    return None, start


def bootstrap(pe: ProcessEvents) -> int | None:
    """When multiprocessing's bootstrap began (after a spawn child re-imported ``__main__``)."""
    return next((t for t, upd in pe.info_times if "mp_name" in upd), None)


def first_task(pe: ProcessEvents) -> int | None:
    tasks = task_ids(pe)
    if not tasks or not len(pe.ranges):
        return None
    sel = pe.ranges["t0"][np.isin(pe.ranges["nid"], tasks)]
    return int(sel.min()) if len(sel) else None


def reimport_ms(pe: ProcessEvents) -> float | None:
    """Interpreter ready -> multiprocessing's bootstrap (spawn: the re-import of ``__main__``), in ms."""
    boot = bootstrap(pe)
    return None if boot is None else max(0, boot - hook_span(pe)[1]) / 1e6


def reimport_modules(pe: ProcessEvents | None) -> list[tuple[str, float]]:
    """The slowest modules a worker's re-import of ``__main__`` imported (the hook's U line), in ms."""
    # the U line's reader field (trace/events.py), absent from logs the hook wrote before it timed imports
    got = getattr(pe, "main_reimport", None) if pe is not None else None
    modules = got[2].get("modules") if got and isinstance(got[2], dict) else None
    if not isinstance(modules, list):
        return []
    return [(str(m[0]), m[1] / 1e6) for m in modules
            if isinstance(m, list) and len(m) == 2 and isinstance(m[1], (int, float))]


def task_ends(pe: ProcessEvents) -> np.ndarray:
    tasks = task_ids(pe)
    if not tasks or not len(pe.ranges):
        return np.zeros(0, np.int64)
    return pe.ranges["t1"][np.isin(pe.ranges["nid"], tasks)]
