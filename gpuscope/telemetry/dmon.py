"""Text and JSON forms of samples for ``gpuscope monitor`` (like ``nvidia-smi dmon`` / ``pmon``).

A tick becomes a plain dict (:func:`batch_dict`, also the ``--json`` line) and then text lines
(:func:`text_lines`): one ``gpu`` line per device, one ``proc`` line per process and one
``host`` line, each starting with the time. Columns come from the metric table.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from gpuscope.procs import read as processes
from gpuscope.telemetry import metrics
from gpuscope.telemetry.batch import SampleBatch

MIB = 1 << 20
_GPU = [m for m in metrics.of_kind("gpu") if m.short]
_PROC = [m for m in metrics.of_kind("proc") if m.short]
_HOST = [m for m in metrics.of_kind("host") if m.short]


def batch_dict(batch: SampleBatch, names: dict[int, str] | None = None) -> dict[str, Any]:
    """The JSON-ready form of one tick. GPU processes outside the tree (host-only monitor) are
    listed as processes too, with what the driver knows of them."""
    procs = [p._asdict() for p in batch.processes]
    if not batch.processes and batch.gpu_processes:
        procs = _gpu_only_processes(batch, names or {})
    return {
        "type": "sample", "seq": batch.seq, "t": batch.wall_ns / 1e9, "t_ns": batch.t_ns,
        "host": batch.host._asdict() if batch.host is not None else None,
        "gpus": [asdict(d) for d in batch.devices],                  # DeviceSample is a dataclass
        "processes": procs,
        "gpu_processes": [g._asdict() for g in batch.gpu_processes],
        "started": [i._asdict() for i in batch.started],
        "ended": list(batch.ended),
    }


def _gpu_only_processes(batch: SampleBatch, names: dict[int, str]) -> list[dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for g in batch.gpu_processes:
        d = out.get(g.pid)
        if d is None:
            st = processes.read(g.pid)
            name = names.get(g.pid) or (st.comm if st else "?")
            d = out[g.pid] = {"pid": g.pid, "ppid": st.ppid if st else None, "name": name,
                              "state": st.state if st else "?", "cpu": None,
                              "rss": st.rss if st else None, "uss": None,
                              "threads": st.threads if st else None, "gpu_mem": None, "sm_util": None}
        if g.used_memory_bytes is not None:
            d["gpu_mem"] = (d["gpu_mem"] or 0) + g.used_memory_bytes
        if g.sm_util is not None:
            d["sm_util"] = (d["sm_util"] or 0) + g.sm_util
    return list(out.values())


def _cell(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "B":
        return str(int(value) // MIB)
    if unit in ("%", "W"):
        return f"{value:.0f}" if unit == "W" else f"{value:.1f}"
    if unit in ("C", "MHz", ""):
        return str(int(value))
    return str(value)


def header_lines(tick: dict[str, Any] | None = None) -> list[str]:
    """The ``#`` header lines for the kinds present in ``tick`` (all without one); printed at
    the start and every so often, like dmon."""
    out = []
    if tick is None or tick["gpus"]:
        out.append("#time    gpu idx " + " ".join(f"{m.short:>7}" for m in _GPU))
    if tick is None or tick["processes"]:
        out.append("#time    proc    pid    ppid " + " ".join(f"{m.short:>7}" for m in _PROC) + "  command")
    if tick is None or tick.get("host"):
        out.append("#time    host " + " ".join(f"{m.short:>7}" for m in _HOST) + "  cores%")
    return out


def text_lines(tick: dict[str, Any]) -> list[str]:
    """Text lines of one tick (from :func:`batch_dict` or a stored tick of the same shape)."""
    clock = time.strftime("%H:%M:%S", time.localtime(tick["t"]))
    lines = []
    for d in tick["gpus"]:
        lines.append(f"{clock} gpu {d['index']:>3} " + " ".join(f"{_cell(d.get(m.key), m.unit):>7}" for m in _GPU))
    for p in tick["processes"]:
        cols = " ".join(f"{_cell(p.get(m.key), m.unit):>7}" for m in _PROC)
        ppid = p.get("ppid") if p.get("ppid") is not None else "-"
        lines.append(f"{clock} proc {p['pid']:>7} {ppid:>7} {cols}  {p.get('name') or '?'}")
    h = tick.get("host")
    if h:
        cols = " ".join(f"{_cell(h.get(m.key), m.unit):>7}" for m in _HOST)
        cores = " ".join(f"{c:.0f}" for c in h.get("cores") or ())
        lines.append(f"{clock} host {cols}  {cores}")
    return lines
