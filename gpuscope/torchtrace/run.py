"""A run's torch traces: found through the run record's ``torch_traces`` (path, pid, rank, clock
offset), else the files under ``<run>/torch/``; each read apart, so that a bad or missing trace
is one line in ``problems`` and the other ranks stay in the report."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.runrecord.folder import read_json

if TYPE_CHECKING:
    from gpuscope.torchtrace.reader import TorchTrace

TORCH_DIR = "torch"
SUFFIXES = (".json", ".json.gz")
META_SUFFIX = ".meta.json"          # gpuscope's note beside each trace it recorded (pid, rank, clock)
LOST_NOTE = "torch profiler:"       # the run's note of a process that lost its trace


@dataclass
class TraceRef:
    """Where one process's trace is and what the run knows of it."""

    path: str
    pid: int | None = None
    rank: int | None = None
    clock_offset_ns: int = 0
    clock_uncertainty_ns: int | None = None
    lost: str | None = None          # the recorder's reason when the process left no trace


@dataclass
class TorchRun:
    """The traces read, and one line per trace that could not be read or is missing."""

    run_dir: str
    traces: list[TorchTrace] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def find_traces(run_dir: str | Path) -> list[TraceRef]:
    """The run's trace references: the record's ``torch_traces`` if it lists any, else the files
    in ``<run>/torch/`` (``*.json``, ``*.json.gz``)."""
    run_dir = Path(run_dir)
    summary = read_json(os.path.join(run_dir, "summary.json")) or {}
    listed = summary.get("torch_traces")
    if isinstance(listed, list) and listed:
        refs = []
        for item in listed:
            if not isinstance(item, dict):
                continue
            path = str(item.get("path") or "")
            refs.append(TraceRef(str(run_dir / path) if path and not os.path.isabs(path) else path,
                                 _int_or_none(item.get("pid")), _int_or_none(item.get("rank")),
                                 _int_or_none(item.get("clock_offset_ns")) or 0,
                                 _int_or_none(item.get("clock_uncertainty_ns")),
                                 str(item["lost"]) if item.get("lost") else None))
        return refs
    folder = run_dir / TORCH_DIR
    if not folder.is_dir():
        return []
    refs = []
    for p in sorted(folder.iterdir()):
        if not p.is_file() or not p.name.endswith(SUFFIXES) or p.name.endswith(META_SUFFIX):
            continue
        stem = p.name[: -len(".json.gz")] if p.name.endswith(".json.gz") else p.name[: -len(".json")]
        meta = read_json(str(folder / (stem + META_SUFFIX))) or {}
        refs.append(TraceRef(str(p), _int_or_none(meta.get("pid")), _int_or_none(meta.get("rank")),
                             _int_or_none(meta.get("clock_offset_ns")) or 0,
                             _int_or_none(meta.get("clock_uncertainty_ns"))))
    return refs


def lost_notes(run_dir: str | Path) -> list[str]:
    """The run's notes about processes that lost their trace (the recorder writes them)."""
    summary = read_json(os.path.join(run_dir, "summary.json")) or {}
    notes = summary.get("notes")
    return [str(n)[len(LOST_NOTE):].strip() for n in notes if str(n).startswith(LOST_NOTE) and "lost" in str(n)] \
        if isinstance(notes, list) else []


def _who(ref: TraceRef) -> str:
    parts = ([f"rank {ref.rank}"] if ref.rank is not None else []) + ([f"pid {ref.pid}"] if ref.pid else [])
    return " ".join(parts) or "a process"


def load_run(run_dir: str | Path, expected_ranks: set[int] | None = None) -> TorchRun:
    """Read every trace of the run; ``expected_ranks``: the ranks the run had (a rank without a
    trace is a problem line)."""
    from gpuscope.torchtrace.reader import read_trace

    out = TorchRun(str(run_dir), problems=lost_notes(run_dir))
    for ref in find_traces(run_dir):
        if ref.lost or not ref.path:
            out.problems.append(f"{_who(ref)}: no torch trace ({ref.lost or 'the run lists none'})")
            continue
        if not os.path.exists(ref.path):
            out.problems.append(f"{_who(ref)}: the torch trace {ref.path} is missing")
            continue
        try:
            out.traces.append(read_trace(ref.path, clock_offset_ns=ref.clock_offset_ns,
                                         clock_uncertainty_ns=ref.clock_uncertainty_ns, pid=ref.pid, rank=ref.rank))
        except UserError as exc:
            out.problems.append(str(exc))
    if expected_ranks:
        have = {t.rank for t in out.traces} | {_problem_rank(p) for p in out.problems}
        out.problems += [f"rank {r}: no torch trace in the run" for r in sorted(expected_ranks - have)]
    out.traces.sort(key=lambda t: (t.rank if t.rank is not None else 1 << 30, t.pid))
    return out


def _problem_rank(line: str) -> int | None:
    head = line.split(":", 1)[0].split()
    return int(head[1]) if len(head) >= 2 and head[0] == "rank" and head[1].isdigit() else None


def has_traces(run_dir: str | Path) -> bool:
    """Cheap (no numpy, no trace read): the run lists torch traces, or has trace files in ``torch/``,
    or notes a process that lost its trace."""
    return bool(find_traces(run_dir)) or bool(lost_notes(run_dir))
