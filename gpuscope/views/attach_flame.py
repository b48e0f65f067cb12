"""A flame graph (icicle: roots on top) of a py-spy speedscope profile, laid out (Qt-free).

:func:`load` reads the speedscope JSON ``py-spy record --format speedscope`` writes (one sampled
profile per process, named "Process PID ..."); :func:`layout` merges the chosen processes' stacks
into one tree, a process (or a role) as the top row, and returns the boxes to draw: depth, start
and width as fractions of all samples.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.trace import timeline as T
    from gpuscope.attach.profile import SampledTimeline
    from gpuscope.nsys.report import Report

_PROCESS = re.compile(r"Process (\d+)")
_ANCESTRY = re.compile(r"^process \d+:")    # py-spy --subprocesses roots each stack in its process chain


@dataclass(frozen=True)
class Frame:
    """A stack frame of the samples: function, file, line."""

    name: str
    file: str
    line: int


@dataclass
class ProcessSamples:
    """One process's samples: stacks of frame indices, root first."""

    pid: int
    stacks: list[list[int]] = field(default_factory=list)


@dataclass
class Samples:
    """A speedscope file's frames and each process's sampled stacks."""

    frames: list[Frame]
    processes: list[ProcessSamples]

    @property
    def total(self) -> int:
        return sum(len(p.stacks) for p in self.processes)


@dataclass(frozen=True)
class Box:
    """One box of the flame graph: ``x`` and ``width`` are fractions of the samples shown."""

    depth: int
    x: float
    width: float
    name: str
    file: str
    line: int
    samples: int
    top: str          # the top row's label (a process or a role): its colour family


@dataclass
class _Node:
    """A node of the flame graph being built: a frame and its samples below."""

    name: str
    file: str = ""
    line: int = 0
    samples: int = 0
    kids: dict[tuple[str, str, int], _Node] = field(default_factory=dict)


def load(path: str) -> Samples:
    """The samples of a speedscope file (empty when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return Samples([], [])
    frames = [Frame(str(f.get("name", "?")), str(f.get("file", "") or ""), int(f.get("line") or 0))
              for f in data.get("shared", {}).get("frames", [])]
    procs = []
    for prof in data.get("profiles", []):
        m = _PROCESS.search(str(prof.get("name", "")))
        keep = [0 <= i < len(frames) and not _ANCESTRY.match(frames[i].name) for i in range(len(frames))]
        stacks = [[i for i in s if 0 <= i < len(frames) and keep[i]] for s in prof.get("samples", []) if s]
        procs.append(ProcessSamples(int(m.group(1)) if m else 0, stacks))
    return Samples(frames, procs)


def layout(samples: Samples, label_of: dict[int, str] | None = None, pids: set[int] | None = None,
           min_width: float = 0.0) -> list[Box]:
    """The boxes, top row first: each process's label (``label_of``: pid -> text, e.g. its role;
    processes with the same label merge), then its stacks. ``min_width``: narrower boxes are left out."""
    root = _Node("all")
    for proc in samples.processes:
        if pids is not None and proc.pid not in pids:
            continue
        label = (label_of or {}).get(proc.pid, f"pid {proc.pid}")
        top = root.kids.setdefault(("", label, 0), _Node(label))
        for stack in proc.stacks:
            top.samples += 1
            node = top
            for i in stack:
                f = samples.frames[i]
                node = node.kids.setdefault((f.name, f.file, f.line), _Node(f.name, f.file, f.line))
                node.samples += 1
            root.samples += 1
    boxes: list[Box] = []
    total = root.samples or 1
    todo: deque[tuple[_Node, int, float, str]] = deque()
    x = 0.0
    for top in sorted(root.kids.values(), key=lambda n: -n.samples):
        todo.append((top, 0, x, top.name))
        x += top.samples / total
    while todo:
        node, depth, x0, label = todo.popleft()
        width = node.samples / total
        if width < min_width:
            continue
        boxes.append(Box(depth, x0, width, node.name, node.file, node.line, node.samples, label))
        x = x0
        for kid in sorted(node.kids.values(), key=lambda n: -n.samples):
            todo.append((kid, depth + 1, x, label))
            x += kid.samples / total
    return boxes


def depth_of(boxes: list[Box]) -> int:
    return 1 + max((b.depth for b in boxes), default=-1)


def box_at(boxes: list[Box], x: float, depth: int) -> Box | None:
    """The box under a point (``x`` a fraction, ``depth`` a row)."""
    return next((b for b in boxes if b.depth == depth and b.x <= x < b.x + b.width), None)


# --------------------------------------------------------------------------- the report's timeline

def add_samples(tl: T.Timeline, sampled: SampledTimeline, roles: dict[int, str] | None = None) -> int:
    """Append a profile's sampled frames to ``tl`` (source ``cpu samples``, a lane per process and
    thread, a row per depth); ``tl``'s clock must have ``mono_base_ns`` set. Returns the ranges added."""
    import numpy as np

    from gpuscope.trace import timeline as T

    rs = sampled.ranges
    base = tl.mono_base_ns or 0
    n = len(rs)
    if not n:
        return 0
    names = np.array([tl.strings.intern(f"{r.name} ({os.path.basename(r.file)}:{r.line})" if r.file else r.name)
                      for r in rs], np.int32)
    add = T.Ranges(start_ns=T.column("start_ns", [r.start_ns - base for r in rs]),
                   end_ns=T.column("end_ns", [r.end_ns - base for r in rs]),
                   pid=T.column("pid", [r.pid for r in rs]), tid=T.column("tid", [r.tid for r in rs]),
                   depth=np.array([r.depth for r in rs], np.int16), name_id=T.column("name_id", names),
                   color=np.zeros(n, np.uint32), domain_id=np.zeros(n, np.int32), category=np.zeros(n, np.int32),
                   style=np.full(n, T.STYLE_PUSHPOP, np.uint8), source=np.full(n, T.SOURCE_PYSPY, np.uint8),
                   flags=np.zeros(n, np.uint8), end_tid=np.full(n, -1, np.int32))
    tl.ranges = T.Ranges.concat([tl.ranges, add])
    known = set(tl.processes.pid.tolist())
    new = sorted({r.pid for r in rs} - known)
    if new:
        tl.processes = T.Processes.concat([tl.processes, T.Processes(
            pid=T.column("pid", new),
            name_id=T.column("name_id", [tl.strings.intern(f"{(roles or {}).get(p, 'process')} {p}") for p in new]),
            source=np.full(len(new), 1 << T.SOURCE_PYSPY, np.uint8))])
    return n


def timeline_report(folder: str | os.PathLike[str]) -> Report:
    """An attached run folder as a ``Report``: its processes, and its profile's samples as lanes
    (t = 0 at the profile's start; no lanes when the run has no profile)."""
    from gpuscope.attach import profile
    from gpuscope.attach.report import PROFILE_FILE
    from gpuscope.nsys.report import Report
    from gpuscope.runrecord.folder import read_folder
    from gpuscope.trace import summary
    from gpuscope.trace import timeline as T

    record = read_folder(folder)
    roles = {p.pid: p.role for p in record.processes}
    tl = T.Timeline()
    sampled = profile.read_ranges(profile.timeline_path(os.path.join(folder, PROFILE_FILE)))
    notes = ["an attached run: no nsys export and no gpuscope event logs; the lanes are py-spy's samples"]
    if sampled is None:
        notes = ["an attached run without a profile: nothing to draw (Profile in the Attached tab, or "
                 "gpuscope attach --profile)"]
    else:
        tl.mono_base_ns, tl.wall_base_ns = sampled.start_mono_ns, sampled.start_wall_ns
        tl.duration_ns = max(0, sampled.end_mono_ns - sampled.start_mono_ns)
        add_samples(tl, sampled, roles)
    return Report(path=Path(folder), sqlite_path=None, nsys_version=None, schema_version=None, naming="plain",
                  summaries={"nvtx": [], "kernel": [], "osrt": []}, processes=summary.process_table(tl), loaded=tl,
                  notes=notes)
