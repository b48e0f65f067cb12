"""``gpu_sharing`` for ``gpuscope report``: the figures of :mod:`gpuscope.gpu.sharing` as JSON and text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.gpu.sharing import DeviceSharing, device_of, of_timeline

if TYPE_CHECKING:
    from gpuscope.trace.timeline import Timeline


def rank_of(role: str | None) -> int | None:
    """``"rank 3"`` -> 3 (the hook names torchrun workers so), else None."""
    if role and role.startswith("rank "):
        head = role[5:].split()[0] if role[5:].split() else ""
        return int(head) if head.isdigit() else None
    return None


def to_json(found: list[DeviceSharing], roles: dict[int, str] | None = None,
            tl: Timeline | None = None) -> list[dict]:
    """The ``gpu_sharing`` list of ``gpuscope report --json`` (seconds; see docs/GPU-SHARING.md).
    ``tl``: the Timeline analysed, for a job across nodes (each device then names its node)."""
    roles = roles or {}

    def s(ns: int | None) -> float | None:
        return None if ns is None else round(ns / 1e9, 9)

    def where(code: int) -> dict:
        node, device = device_of(tl, code) if tl is not None else (None, code)
        return {"device": device, "node": node} if node is not None else {"device": device}

    return [{**where(d.device), "busy_s": s(d.busy_ns), "concurrent_s": s(d.concurrent_ns),
             "switches": d.switches, "switch_s": s(d.switch_ns), "span_s": s(d.span_ns),
             "processes": [{"pid": p.pid, "rank": rank_of(roles.get(p.pid)), "role": roles.get(p.pid),
                            "gpu_s": s(p.gpu_ns), "share": round(p.share, 6), "queued_s": s(p.queued_ns),
                            "items": p.items} for p in d.processes]}
            for d in found]


def report_json(report) -> list[dict]:
    """``gpu_sharing`` of an :class:`gpuscope.nsys.report.Report` (roles from its coverage, if any)."""
    sums = getattr(report, "summaries", None) or {}
    if "kernel" in sums and not (sums.get("kernel") or sums.get("memop")):
        return []     # no GPU work: do not read the timeline for nothing
    tl = report.timeline
    if not len(tl.kernels) and not len(tl.memops):
        return []
    cov = getattr(report, "coverage", None)
    roles = {p.pid: p.role for p in getattr(cov, "processes", [])} if cov is not None else {}
    return to_json(of_timeline(tl), roles, tl)


def text_lines(rows: list[dict]) -> list[str]:
    """``gpu_sharing`` as lines for ``gpuscope report`` (nothing when there was no GPU work)."""
    if not rows:
        return []

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:,.3f}"

    out = ["", "GPU sharing (who ran when on each GPU; times in ms)"]
    for d in rows:
        node = f"{d['node']} " if d.get("node") else ""
        out.append(f"  {node}GPU {d['device']}: busy {ms(d['busy_s'])}, two or more processes at once "
                   f"{ms(d['concurrent_s'])}, {d['switches']} switch(es) between processes costing "
                   f"{ms(d['switch_s'])}")
        for p in d["processes"]:
            who = p["role"] or "process"
            out.append(f"    pid {p['pid']:<8} {who:<16} GPU {ms(p['gpu_s']):>12}  share {p['share'] * 100:5.1f} %"
                       f"  queued behind others {ms(p['queued_s'])}")
    return out
