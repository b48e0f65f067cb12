"""Read the torch allocator memory that processes report in their event logs (``I`` lines).

``gpuscope.inject.torchmem`` emits ``{"torch_mem": {"<device>": {"allocated", "reserved",
"max_allocated"}}}``; the run engine writes it as ``I\\t<t>\\t<json>`` (docs/EVENTS.md). A line
reports every device the process has used, so a device missing from a line reads as 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

FIELDS = ("allocated", "reserved", "max_allocated")   # metric keys of kind "torch"


def parse_torch_mem(lines: Iterable[str]) -> dict[int, dict[str, np.ndarray]]:
    """``{device: {"t_ns", "allocated", "reserved", "max_allocated"}}`` from event-log lines.

    Tolerant: other tags, malformed lines and a final line without newline are skipped.
    """
    rows: list[tuple[int, dict[str, dict[str, int]]]] = []
    for line in lines:
        if not line.startswith("I\t") or not line.endswith("\n"):
            continue
        parts = line.rstrip("\n").split("\t", 2)
        try:
            info = json.loads(parts[2])
            mem = info.get("torch_mem") if isinstance(info, dict) else None
            if isinstance(mem, dict):
                rows.append((int(parts[1]), mem))
        except (IndexError, ValueError):
            continue
    devices = sorted({int(d) for _, mem in rows for d in mem if str(d).isdigit()})
    out: dict[int, dict[str, np.ndarray]] = {}
    for dev in devices:
        t = np.asarray([t for t, _ in rows], dtype=np.int64)
        cols = {f: np.asarray([float((mem.get(str(dev)) or {}).get(f, 0)) for _, mem in rows]) for f in FIELDS}
        out[dev] = {"t_ns": t, **cols}
    return out


def _pid_of(path: Path, first_line: str) -> int | None:
    if first_line.startswith("H\t"):
        try:
            return int(json.loads(first_line.split("\t", 1)[1])["pid"])
        except (ValueError, KeyError, TypeError):
            pass
    head = path.name.split("-", 1)[0].split(".", 1)[0]
    return int(head) if head.isdigit() else None


def read_torch_mem(run_dir: str | Path) -> dict[int, dict[int, dict[str, np.ndarray]]]:
    """Per pid and device, the torch allocator series of a run folder (``events/*.log``).

    A fork child's file starts with its own header; a pid reused within the run keeps the
    later file's series.
    """
    out: dict[int, dict[int, dict[str, np.ndarray]]] = {}
    for path in sorted(Path(run_dir, "events").glob("*.log"), key=lambda p: p.stat().st_mtime):
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as fh:
                lines = fh.readlines()
        except OSError:
            continue
        pid = _pid_of(path, lines[0]) if lines else None
        series = parse_torch_mem(lines)
        if pid is not None and series:
            out[pid] = series
    return out
