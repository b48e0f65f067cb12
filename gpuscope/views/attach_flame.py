"""A flame graph (icicle: roots on top) of a py-spy speedscope profile, laid out (Qt-free).

:func:`load` reads the speedscope JSON ``py-spy record --format speedscope`` writes (one sampled
profile per process, named "Process PID ..."); :func:`layout` merges the chosen processes' stacks
into one tree, a process (or a role) as the top row, and returns the boxes to draw: depth, start
and width as fractions of all samples.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field

_PROCESS = re.compile(r"Process (\d+)")
_ANCESTRY = re.compile(r"^process \d+:")    # py-spy --subprocesses roots each stack in its process chain


@dataclass(frozen=True)
class Frame:
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
