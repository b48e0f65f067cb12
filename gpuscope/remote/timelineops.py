"""The agent's timeline pages: a report stays on the remote, read once into the agent's memory, and
the window pulls the rows of the time window it draws, table by table, as the user zooms.

Columns travel as raw little-endian numpy bytes in base64 (``{"dtype", "shape", "b64"}``), with
the strings their name ids use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.remote import protocol

if TYPE_CHECKING:
    from gpuscope.remote.call import Call

TABLES = ("ranges", "marks", "kernels", "memops", "cuda_api", "osrt")
KEEP_REPORTS = 2           # reports kept in the agent's memory (a 1 M-range report is ~100 MB)
PAGE_MAX = 200_000         # rows in one page; the window asks again for a narrower window

_reports: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()

__all__ = ["kept_report", "timeline_info", "timeline_page"]


def kept_report(call: Call) -> Any:
    """The report of ``run`` or ``path``, read once and kept (the newest few)."""
    from gpuscope import api

    target = call.arg("run", str, None) or call.arg("path", str, None)
    if not target:
        raise UserError(f"{call.op}: give run or path")
    if call.args.get("run"):
        target = str(api.open_run(target).run_folder)
    with _lock:
        report = _reports.get(target)
        if report is not None:
            _reports.move_to_end(target)
            return report
    report = api.load_report(target, cancel=call.cancelled)
    with _lock:
        _reports[target] = report
        while len(_reports) > KEEP_REPORTS:
            _reports.popitem(last=False)
    return report


def encode_column(values: Any) -> dict[str, Any]:
    import numpy as np

    array = np.ascontiguousarray(values)
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return {"dtype": little.dtype.str, "shape": list(little.shape), "b64": protocol.b64(little.tobytes())}


def decode_column(data: dict[str, Any]) -> Any:
    """The numpy array :func:`encode_column` sent."""
    import numpy as np

    return np.frombuffer(protocol.unb64(data["b64"]), dtype=np.dtype(data["dtype"])).reshape(data["shape"])


def timeline_info(call: Call) -> dict[str, Any]:
    """What the timeline needs before its first page: extent, processes, threads, row counts."""
    tl = kept_report(call).timeline
    ids = {*tl.processes.name_id.tolist(), *tl.threads.name_id.tolist(), *tl.domains.name_id.tolist()}
    strings = {int(i): tl.strings.get(int(i)) for i in ids if i >= 0}
    return {"duration_ns": tl.duration_ns, "wall_base_ns": tl.wall_base_ns, "mono_base_ns": tl.mono_base_ns,
            "counts": {name: len(getattr(tl, name)) for name in TABLES},
            "processes": {k: encode_column(v) for k, v in tl.processes.columns().items()},
            "threads": {k: encode_column(v) for k, v in tl.threads.columns().items()},
            "domains": {k: encode_column(v) for k, v in tl.domains.columns().items()},
            "strings": strings, "groups": {str(k): v for k, v in tl.groups.items()}}


def timeline_page(call: Call) -> dict[str, Any]:
    """The rows of one table that overlap ``[t0_ns, t1_ns)`` (of ``pids`` if given; ``min_ns``:
    only rows at least that long), at most ``limit``: ``{"columns", "strings", "total" (in the
    window), "narrow" (left out by min_ns), "truncated"}``."""
    import numpy as np

    table = call.arg("table", str, "ranges")
    if table not in TABLES:
        raise UserError(f"timeline_page: table is one of {', '.join(TABLES)}")
    t0, t1 = call.arg("t0_ns", int, 0), call.arg("t1_ns", int, None)
    limit = min(call.arg("limit", int, PAGE_MAX) or PAGE_MAX, PAGE_MAX)
    tl = kept_report(call).timeline
    cols = getattr(tl, table)
    start = cols.start_ns
    end = getattr(cols, "end_ns", start)
    mask = end >= t0
    if t1 is not None:
        mask &= start < t1
    pids = call.arg("pids", list, None)
    if pids:
        mask &= np.isin(cols.pid, np.asarray(pids, dtype=cols.pid.dtype))
    total = int(np.count_nonzero(mask))
    min_ns = call.arg("min_ns", int, 0) or 0
    if min_ns > 0 and end is not start:   # zoomed out: rows narrower than a pixel are left out
        mask &= (end - start) >= min_ns
    index = np.flatnonzero(mask)
    shown = int(index.size)
    index = index[:limit]
    page = cols.take(index)
    hidden = total - shown
    names = {int(i) for key in ("name_id", "short_name_id") if hasattr(page, key)
             for i in np.unique(getattr(page, key)).tolist() if i >= 0}
    return {"columns": {k: encode_column(v) for k, v in page.columns().items()},
            "strings": {i: tl.strings.get(i) for i in names}, "total": total, "narrow": hidden,
            "truncated": shown > limit}
