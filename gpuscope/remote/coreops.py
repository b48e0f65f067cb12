"""The agent's ops over stored runs and the machine: history, a run's record, findings, stacks,
a report's summary, cleanup. Each answers with the records' own dict forms (docs/REMOTE.md)."""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpuscope.errors import UserError

if TYPE_CHECKING:
    import sqlite3

    from gpuscope.remote.call import Call

SCAN_OPTIONS = ("use_gpu", "idle_window_s", "shm_min_age_s")

# the last cleanup listing of this agent (one per connection): cleanup_apply acts on its suspects
_last_scan: dict[str, Any] = {}
# one role reader per run folder (it reads only what the event logs gained), the newest few
_role_readers: OrderedDict[str, Any] = OrderedDict()
_role_lock = threading.Lock()
KEEP_ROLE_READERS = 16

__all__ = ["cleanup_apply", "cleanup_scan", "compare_runs", "delete_runs", "findings", "history", "main_exited",
           "open_run", "report_summary", "roles", "series", "stacks", "stop_process"]


def plain(value: Any) -> Any:
    """A record as JSON data: dataclasses and named tuples as dicts, enums as their values, other
    tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):   # a typing.NamedTuple record
        return {name: plain(getattr(value, name)) for name in value._fields}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def history(call: Call) -> dict[str, Any]:
    """What the History tab shows (``api.history``): rows, sizes, totals, note, series."""
    from gpuscope import api

    limit = call.arg("limit", int, 200) or 200
    return plain(api.history(limit))


def delete_runs(call: Call) -> dict[str, Any]:
    from gpuscope import api

    ids = call.arg("ids", list)
    deleted, freed = api.delete_runs([str(i) for i in ids])
    return {"deleted": deleted, "freed": freed}


def _record(ref: str) -> Any:
    from gpuscope import api

    return api.open_run(ref)


def open_run(call: Call) -> dict[str, Any]:
    """A run's record (``RunRecord.to_json()``, with its spec and versions)."""
    record = _record(call.arg("ref", str))
    return dict(record.to_json(), spec=record.spec, versions=record.versions)


def findings(call: Call) -> list[dict[str, Any]]:
    from gpuscope import api

    record = _record(call.arg("run", str))
    return [f.to_dict() for f in api.findings(record.run_folder)]


def stacks(call: Call) -> dict[str, Any]:
    """The run's stacks: taken now (``take``) while it runs, else the last ones taken."""
    from gpuscope import api

    record = _record(call.arg("run_id", str))
    if call.arg("take", bool, False):
        taken, live, procs = api.take_stacks(record.run_id, record.run_folder)
    else:
        (taken, procs), live = api.latest_stacks(record.run_folder), False
    return {"taken_ns": taken, "live": live, "processes": [p.to_dict() for p in procs]}


def report_summary(call: Call) -> Any:
    """What ``gpuscope report --json`` prints for a run (id or folder) or a report file, read in
    the agent's own process (its imports and the report cache stay warm); a cancel ends the read."""
    from gpuscope.views.report_json import report_object

    target = call.arg("run", str, None) or call.arg("path", str, None)
    if not target:
        raise UserError("report_summary: give run or path")
    return report_object(target, cancel=call.cancelled)


def cleanup_scan(call: Call) -> dict[str, Any]:
    """Leftovers on this host (``ScanResult.to_dict()``); ``cleanup_apply`` acts on this listing."""
    from gpuscope.cleanup.scanner import scan
    from gpuscope.store.db import connect

    options = call.arg("options", dict, {}) or {}
    kwargs = {k: options[k] for k in SCAN_OPTIONS if k in options}
    store = connect()
    try:
        result = scan(conn=store, **kwargs)
    finally:
        store.close()
    _last_scan["result"] = result
    return dict(result.to_dict())


def cleanup_apply(call: Call) -> list[dict[str, Any]]:
    """Act on suspects of the last listing, by key, with cleanup's safety rules."""
    from gpuscope import api
    from gpuscope.store.db import connect

    keys = [str(k) for k in call.arg("keys", list)]
    result = _last_scan.get("result")
    if result is None:
        raise UserError("cleanup_apply: list the leftovers first (cleanup_scan)")
    by_key = {s.key: s for s in result.suspects}
    missing = [k for k in keys if k not in by_key]
    if missing:
        raise UserError(f"cleanup_apply: not in the last listing: {', '.join(missing)} (scan again)")
    grace = float(call.arg("grace_s", (int, float), 3.0))
    store = connect()
    try:
        done = api.cleanup_apply([by_key[k] for k in keys], bool(call.arg("force", bool, False)), grace, store)
    finally:
        store.close()
    return [r.to_dict() for r in done]


def compare_runs(call: Call) -> dict[str, Any]:
    """Recorded runs compared (``Comparison.to_dict()``; ``Comparison.from_dict`` reads it)."""
    from gpuscope import api

    ids = [str(i) for i in call.arg("ids", list)]
    return api.compare_runs(ids).to_dict()


def stop_process(call: Call) -> dict[str, Any] | None:
    """One process stopped with cleanup's safety rules and identity check (None: it had ended)."""
    from gpuscope import api

    start_time = call.arg("start_time", (int, float), None)
    result = api.stop_process(call.arg("pid", int), float(start_time) if start_time is not None else None,
                              bool(call.arg("kill", bool, False)), float(call.arg("grace_s", (int, float), 3.0)),
                              call.arg("run_id", str, None))
    return result.to_dict() if result is not None else None


def main_exited(call: Call) -> bool:
    """Whether a run's main process has ended (its event log says so)."""
    from gpuscope import api

    return api.main_exited(call.arg("run_dir", str))


def roles(call: Call) -> dict[str, Any]:
    """Role, rank and start method of a run's processes, and their exit codes, read from its
    event logs so far: ``{"identities": {pid: {...}}, "exits": {pid: code}}`` (pids as text)."""
    from gpuscope.views.procroles import RoleReader

    run_dir = call.arg("run_dir", str)
    if not Path(run_dir).is_dir():
        raise UserError(f"roles: no run folder {run_dir}")
    with _role_lock:
        reader = _role_readers.get(run_dir)
        if reader is None:
            reader = _role_readers[run_dir] = RoleReader(run_dir, reread_s=0.25)
        _role_readers.move_to_end(run_dir)
        while len(_role_readers) > KEEP_ROLE_READERS:
            _role_readers.popitem(last=False)
    identities, exits = reader.read()
    return {"identities": {str(pid): plain(ident) for pid, ident in identities.items()},
            "exits": {str(pid): code for pid, code in exits.items()}}


def series(call: Call) -> dict[str, Any] | None:
    """A run's stored samples (``gpuscope.telemetry.series.load_series``; None without samples),
    every array as an encoded column, every key as text (a (pid, device) key as ``"PID:DEVICE"``)."""
    from gpuscope import api
    from gpuscope.store.db import connect
    from gpuscope.telemetry.series import load_series

    run_id = api.open_run(call.arg("run_id", str)).run_id
    store = connect()
    try:
        data = load_series(cast("sqlite3.Connection", store), run_id)   # the store's wrapper answers alike
    finally:
        store.close()
    return _encoded(data) if data is not None else None


def _encoded(value: Any) -> Any:
    import numpy as np

    from gpuscope.remote.timelineops import encode_column

    if isinstance(value, np.ndarray):
        return encode_column(value)
    if isinstance(value, dict):
        return {":".join(map(str, k)) if isinstance(k, tuple) else str(k): _encoded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encoded(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
