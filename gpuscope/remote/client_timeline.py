"""A remote report's timeline, pulled as the whole-run view draws it (the agent's ``timeline_info``
and ``timeline_page``, docs/REMOTE.md): each table's rows over the whole run, those narrower
than one pixel of a wide window left out, at most one page each. The report file stays there."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuscope.remote.timelineops import decode_column
from gpuscope.trace import timeline as T

if TYPE_CHECKING:
    from gpuscope.remote.client import RemoteCore

WIDTH_PX = 4000        # rows narrower than 1/WIDTH_PX of the run are not drawn in its whole view
TABLES: dict[str, Any] = {"ranges": T.Ranges, "marks": T.Marks, "kernels": T.Kernels, "memops": T.MemOps,
          "cuda_api": T.Calls, "osrt": T.Calls}
STRING_COLUMNS = ("name_id", "short_name_id")


def overview(core: RemoteCore, target: dict[str, str], counts: dict[str, int] | None = None) -> T.Timeline:
    """The timeline of the report ``target`` (``{"run": ...}`` or ``{"path": ...}``) on ``core``'s host;
    ``counts`` gets each table's row count there."""
    info = core.call("timeline_info", **target)
    if counts is not None:
        counts.update({k: int(v) for k, v in (info.get("counts") or {}).items()})
    duration = int(info.get("duration_ns") or 0)
    strings = T.StringTable()
    ids = _Ids(strings, info.get("strings") or {})
    tl = T.Timeline(strings=strings, wall_base_ns=info.get("wall_base_ns"), mono_base_ns=info.get("mono_base_ns"),
                    duration_ns=duration or None,
                    groups={int(k): str(v) for k, v in (info.get("groups") or {}).items()})
    tl.processes = ids.table(T.Processes, info["processes"])
    tl.threads = ids.table(T.Threads, info["threads"])
    if info.get("domains"):      # NVTX domains name their ranges ("gpuscope:work")
        tl.domains = ids.table(T.Domains, info["domains"])
    min_ns = duration // WIDTH_PX
    left_out = 0
    for name, cls in TABLES.items():
        if not (info.get("counts") or {}).get(name):
            continue
        page = core.call("timeline_page", **target, table=name, t0_ns=0, min_ns=min_ns)
        ids.add(page.get("strings") or {})
        setattr(tl, name, ids.table(cls, page["columns"]))
        left_out += int(info["counts"][name]) - len(getattr(tl, name))
    if left_out:
        tl.notes.append(f"{left_out:,} rows narrower than a pixel of the whole run stay on {core.host}")
    tl.nvtx_pids = np.unique(tl.ranges.pid).astype(np.int32) if len(tl.ranges) else tl.nvtx_pids
    return tl


def refine(core: RemoteCore, target: dict[str, str], tl: T.Timeline, counts: dict[str, int], t0_ns: int,
           t1_ns: int, min_ns: int) -> tuple[T.Timeline, int]:
    """A new timeline: ``tl`` with the rows of ``[t0_ns, t1_ns)`` at least ``min_ns`` long added
    (the span the user zoomed into), and how many rows were new. ``tl`` itself is not changed."""
    strings = T.StringTable(tl.strings.values)     # the same ids: its values are distinct
    ids = _Ids(strings, {})
    new = replace(tl, strings=strings, notes=list(tl.notes))
    added = 0
    for name, cls in TABLES.items():
        if not counts.get(name) or len(getattr(tl, name)) >= counts[name]:
            continue      # none there, or all of them here already
        page = core.call("timeline_page", **target, table=name, t0_ns=max(0, int(t0_ns)), t1_ns=int(t1_ns),
                         min_ns=max(0, int(min_ns)))
        ids.add(page.get("strings") or {})
        old = getattr(tl, name)
        merged = _distinct(cls.concat([old, ids.table(cls, page["columns"])]))
        added += len(merged) - len(old)
        setattr(new, name, merged)
    if added and len(new.ranges):
        new.nvtx_pids = np.unique(new.ranges.pid).astype(np.int32)
    return new, added


def flows(core: RemoteCore, target: dict[str, str]) -> Any:
    """The report's pool flow arrows (``gpuscope.trace.flows.Flows``), read from the event logs
    there (``timeline_flows``); None for a bare export, or an agent without the op."""
    from gpuscope.errors import UserError
    from gpuscope.trace.flows import Flows

    try:
        sent = core.call("timeline_flows", **target)
    except UserError as exc:
        if "unknown op" not in str(exc):
            raise
        return None      # an older agent: the timeline is drawn without arrows
    if not sent:
        return None
    return Flows(**{k: decode_column(v).copy() for k, v in sent["columns"].items()})


def _distinct(table: Any) -> Any:
    """Rows sorted by start, each row once (a page overlaps what was pulled before)."""
    keys = [getattr(table, k) for k in ("name_id", "depth", "tid", "pid", "end_ns", "start_ns") if hasattr(table, k)]
    if len(table) < 2:
        return table
    order = np.lexsort(keys)
    same = np.ones(len(order) - 1, dtype=bool)
    for k in keys:
        s = k[order]
        same &= s[1:] == s[:-1]
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = ~same
    return table.take(order[keep])


class _Ids:
    """The host's string ids mapped to this timeline's own string table."""

    def __init__(self, strings: T.StringTable, sent: dict[str, Any]) -> None:
        self.strings = strings
        self.lut = np.full(1, -1, dtype=np.int64)
        self.add(sent)

    def add(self, sent: dict[str, Any]) -> None:
        pairs = {int(k): v for k, v in sent.items() if v is not None}
        if not pairs:
            return
        top = max(pairs) + 1
        if top > len(self.lut):
            self.lut = np.concatenate([self.lut, np.full(top - len(self.lut), -1, dtype=np.int64)])
        for rid, text in pairs.items():
            self.lut[rid] = self.strings.intern(str(text))

    def table(self, cls: Any, columns: dict[str, Any]) -> Any:
        cols = {k: decode_column(v).copy() for k, v in columns.items()}
        for key in STRING_COLUMNS:
            if key in cols:
                col = cols[key]
                safe = np.clip(col, 0, len(self.lut) - 1)
                cols[key] = np.where(col >= 0, self.lut[safe], -1).astype(col.dtype)
        return cls(**cols)
