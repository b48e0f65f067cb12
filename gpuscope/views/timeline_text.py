"""Text for the timeline view: time formatting, axis ticks, range details and tooltips (no Qt)."""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np

from gpuscope.views import timeline_lod as L
from gpuscope.trace import timeline as T


def fmt_ns(ns: float) -> str:
    """A duration or time in the unit that reads best (``12.3 µs``, ``1.500 s``)."""
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.3g} µs" if a < 1e4 else f"{ns / 1e3:.1f} µs"
    if a < 1e9:
        return f"{ns / 1e6:.3g} ms" if a < 1e7 else f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.3f} s"


def nice_step(raw_ns: float) -> float:
    """The 1-2-5 step at or above ``raw_ns``."""
    if raw_ns <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(raw_ns))
    for m in (1, 2, 5, 10):
        if m * exp >= raw_ns:
            return m * exp
    return 10 * exp


def tick_label(t_ns: float, step_ns: float) -> str:
    """An axis label with as many decimals as the step needs."""
    if abs(t_ns) < step_ns / 2:
        t_ns = 0.0   # no "-0 s"
    for unit, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if step_ns >= div / 1000 or unit == "µs":
            decimals = max(0, int(math.ceil(-math.log10(step_ns / div) - 1e-9)))
            return f"{t_ns / div:.{min(decimals, 9)}f} {unit}"
    return f"{t_ns:.0f} ns"


def _hex(argb: int) -> str:
    return f"#{argb & 0xFFFFFF:06x}"


def range_details(layout: L.TimelineLayout, lane: L.Lane, row: L.Row | None, pos: int,
                  domains: dict[tuple[int, int], str]) -> dict[str, Any]:
    """Everything the timeline knows about one item: an NVTX range, a kernel, a memory operation,
    or (``row`` None) an NVTX mark."""
    tl = layout.timeline
    if row is None:   # pos indexes lane.marks
        assert lane.mark_ref is not None, "a mark on a lane without marks"
        return _mark(tl, lane, int(lane.mark_ref[pos]), domains)
    i = int(row.ref[pos])
    if lane.kind == L.KIND_GPU_SHARE:
        return _gpu_share(tl, lane, i, row.label(pos, tl.strings.values))
    if lane.kind == L.KIND_NVTX and lane.source == T.SOURCE_TORCH:
        return _torch_op(tl, lane, i, row.label(pos, tl.strings.values))
    if lane.kind == L.KIND_NVTX:
        return _nvtx(tl, lane, i, int(row.color[pos]), domains, row.label(pos, tl.strings.values))
    if lane.kind == L.KIND_API:
        return _api(tl, lane, i)
    if lane.kind == L.KIND_OSRT:
        return _osrt(tl, lane, i)
    if row.is_memop is not None and row.is_memop[pos]:
        return _memop(tl, i)
    return _kernel(tl, i)


def _timing(start: int, end: int, pid: int, tl: T.Timeline) -> dict[str, Any]:
    return {"start_ns": start, "end_ns": end, "duration_ns": end - start, "pid": pid,
            "process": tl.process_name(pid)}


def _nvtx(tl: T.Timeline, lane: L.Lane, i: int, color: int, domains: dict, label: str) -> dict[str, Any]:
    r = tl.ranges
    flags = int(r.flags[i])
    # the full name (``gpuscope:work`` for gpuscope's task range, ``work`` for the script's), as
    # the NVTX summary and the bar's label
    return {"kind": "nvtx", "index": i, "name": label,
            **_timing(int(r.start_ns[i]), int(r.end_ns[i]), int(r.pid[i]), tl),
            "tid": int(r.tid[i]), "thread": lane.label, "depth": int(r.depth[i]),
            "source": T.SOURCE_NAMES[int(r.source[i])], "style": T.STYLE_NAMES[int(r.style[i])],
            "domain": domains.get((int(r.pid[i]), int(r.domain_id[i]))), "color": _hex(color),
            "end_missing": bool(flags & T.FLAG_END_MISSING),
            "ended_on_tid": int(r.end_tid[i]) if flags & T.FLAG_OTHER_THREAD else None}


def _torch_op(tl: T.Timeline, lane: L.Lane, i: int, label: str) -> dict[str, Any]:
    """An event of a PyTorch profiler trace (an operator, a label, a runtime call)."""
    r = tl.ranges
    pid = int(r.pid[i])
    return {"kind": "torch", "index": i, "name": label, **_timing(int(r.start_ns[i]), int(r.end_ns[i]), pid, tl),
            "tid": int(r.tid[i]), "thread": lane.label, "depth": int(r.depth[i]), "source": "torch",
            "clock": tl.torch_clocks.get(pid)}


def lane_note(lane: L.Lane, tl: T.Timeline) -> str:
    """What a lane's label tooltip adds: whose records it draws (torch: how its clock was set)."""
    if lane.source == T.SOURCE_TORCH:
        return " — " + tl.torch_clocks.get(lane.pid, "PyTorch profiler trace")
    return " — gpuscope's own records" if lane.source == T.SOURCE_GPUSCOPE else ""


def _mark(tl: T.Timeline, lane: L.Lane, i: int, domains: dict) -> dict[str, Any]:
    mk = tl.marks
    t = int(mk.start_ns[i])
    return {"kind": "mark", "index": i, "name": tl.name(mk.name_id[i]) or "(unnamed mark)",
            **_timing(t, t, int(mk.pid[i]), tl), "tid": int(mk.tid[i]), "thread": lane.label,
            "source": T.SOURCE_NAMES[int(mk.source[i])],
            "domain": domains.get((int(mk.pid[i]), int(mk.domain_id[i]))),
            "color": _hex(int(mk.color[i])) if mk.color[i] else None}


def _api(tl: T.Timeline, lane: L.Lane, i: int) -> dict[str, Any]:
    c = tl.cuda_api
    return {"kind": "cuda_api", "index": i, "name": tl.name(c.name_id[i]) or "(CUDA call)",
            **_timing(int(c.start_ns[i]), int(c.end_ns[i]), int(c.pid[i]), tl), "tid": int(c.tid[i]),
            "thread": lane.label, "correlation": int(c.correlation[i]), "source": "nsys"}


def _osrt(tl: T.Timeline, lane: L.Lane, i: int) -> dict[str, Any]:
    c = tl.osrt
    return {"kind": "osrt", "index": i, "name": tl.name(c.name_id[i]) or "(OS call)",
            **_timing(int(c.start_ns[i]), int(c.end_ns[i]), int(c.pid[i]), tl), "tid": int(c.tid[i]),
            "thread": lane.label, "source": "nsys"}


def _memop(tl: T.Timeline, i: int) -> dict[str, Any]:
    m = tl.memops
    return {"kind": "memop", "index": i, "name": tl.name(m.name_id[i]) or "memory operation",
            **_timing(int(m.start_ns[i]), int(m.end_ns[i]), int(m.pid[i]), tl),
            "device": int(m.device[i]), "stream": int(m.stream[i]), "bytes": int(m.bytes[i]),
            "source": "nsys", "correlation": int(m.correlation[i])}


def _gpu_share(tl: T.Timeline, lane: L.Lane, i: int, label: str) -> dict[str, Any]:
    """A stretch of a GPU's "who ran" lane: one process's work, or several at once (pid -1)."""
    seg = lane.segments
    start, end, pid = int(seg.start[i]), int(seg.end[i]), int(seg.pid[i])  # type: ignore[attr-defined]
    return {"kind": "gpu_share", "index": i, "name": f"GPU {lane.device}: {label}", "start_ns": start,
            "end_ns": end, "duration_ns": end - start, "pid": pid if pid >= 0 else None,
            "process": tl.process_name(pid) if pid >= 0 else None, "device": lane.device, "source": "nsys"}


def _kernel(tl: T.Timeline, i: int) -> dict[str, Any]:
    k = tl.kernels
    if i >= tl.torch_rows.get("kernels", len(k)):   # a PyTorch profiler trace's GPU event
        pid = int(k.pid[i])
        return {"kind": "kernel", "index": i, "name": tl.name(k.name_id[i]) or "(kernel)",
                **_timing(int(k.start_ns[i]), int(k.end_ns[i]), pid, tl), "device": int(k.device[i]),
                "stream": int(k.stream[i]), "correlation": int(k.correlation[i]), "source": "torch",
                "clock": tl.torch_clocks.get(pid)}
    return {"kind": "kernel", "index": i, "name": tl.name(k.name_id[i]) or "(kernel)",
            "short_name": tl.name(k.short_name_id[i]),
            **_timing(int(k.start_ns[i]), int(k.end_ns[i]), int(k.pid[i]), tl),
            "device": int(k.device[i]), "stream": int(k.stream[i]), "context": int(k.context[i]),
            "grid": [int(v) for v in np.asarray(k.grid[i]).ravel()],
            "block": [int(v) for v in np.asarray(k.block[i]).ravel()],
            "correlation": int(k.correlation[i]), "source": "nsys"}


_LABELS = (("duration_ns", "duration"), ("start_ns", "start"), ("end_ns", "end"), ("process", "process"),
           ("pid", "pid"), ("tid", "tid"), ("thread", "thread"), ("depth", "depth"), ("domain", "domain"),
           ("style", "style"), ("source", "source"), ("device", "device"), ("stream", "stream"),
           ("bytes", "bytes"), ("grid", "grid"), ("block", "block"), ("correlation", "correlation"),
           ("color", "color"), ("ended_on_tid", "ended on thread"), ("clock", "clock"))


def detail_pairs(d: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs of a details dict, times formatted."""
    out = []
    for key, label in _LABELS:
        v = d.get(key)
        if v is None:
            continue
        if key.endswith("_ns"):
            text = fmt_ns(v)
        elif isinstance(v, list):
            text = " × ".join(str(x) for x in v)
        elif key == "bytes":
            text = f"{v:,}"
        else:
            text = str(v)
        out.append((label, text))
    if d.get("end_missing"):
        out.append(("note", "no end in the export: drawn to the last NVTX timestamp"))
    return out


def tooltip_html(d: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
                   for k, v in detail_pairs(d) if k in ("duration", "start", "process", "pid", "tid",
                                                        "depth", "source", "device", "stream", "domain",
                                                        "clock"))
    return f"<b>{html.escape(str(d['name']))}</b><table>{rows}</table>"


def measure_html(m) -> str:
    """A measured span (``timeline_query.Measure``) as the details pane shows it: the duration, then
    per kind and name the items overlapping it, their time inside it and their whole durations."""
    rows = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.kind)}</td><td align=right>{r.count:,}</td>"
        f"<td align=right>{html.escape(fmt_ns(r.inside_ns))}</td>"
        f"<td align=right>{html.escape(fmt_ns(r.total_ns))}</td></tr>"
        for r in m.rows)
    head = "<tr><th align=left>name</th><th align=left>kind</th><th>count</th><th>inside</th><th>whole</th></tr>"
    return (f"<h3>{html.escape(fmt_ns(m.duration_ns))} measured</h3>"
            f"<p>from {html.escape(fmt_ns(m.t0))} to {html.escape(fmt_ns(m.t1))}; Esc clears</p>"
            f"<table cellspacing=4>{head}{rows}</table>" if m.rows else
            f"<h3>{html.escape(fmt_ns(m.duration_ns))} measured</h3><p>no ranges in this span</p>")
