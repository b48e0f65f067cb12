"""Which runs formed one start-method series, kept beside the run store so History can show a
series as one entry that reopens its comparison.

One JSON file per series under ``<GPUSCOPE_HOME>/series/``: ``{id, created_ns, script, methods,
repeat, runs: {label: [run ids]}}``. A file that cannot be read is skipped (History still lists
the runs one by one).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope import paths

if TYPE_CHECKING:
    from gpuscope.spec import RunSpec

FOLDER = "series"


@dataclass(frozen=True)
class SeriesEntry:
    """One recorded series: its runs per label (start method), in the order they ran."""

    id: str
    created_ns: int
    script: str
    methods: tuple[str, ...]
    repeat: int
    runs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def run_ids(self) -> list[str]:
        """Every run of the series, label by label (what a comparison of it takes)."""
        return [rid for ids in self.runs.values() for rid in ids]

    @property
    def title(self) -> str:
        return f"{' vs '.join(self.methods)}, ×{self.repeat}"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SeriesEntry:
        """A series from its record (its file, or a remote agent's History)."""
        runs = {str(k): [str(r) for r in v] for k, v in d["runs"].items()}
        return cls(str(d["id"]), int(d["created_ns"]), str(d.get("script", "")),
                   tuple(str(m) for m in d.get("methods", runs)), int(d.get("repeat", 0)), runs)


def series_dir() -> Path:
    return paths.data_dir() / FOLDER


def save_series(groups: dict[str, list[str]], spec: RunSpec, methods: list[str], repeat: int) -> SeriesEntry:
    """Record a finished (or stopped) series; returns what was written."""
    entry = SeriesEntry(id=f"S{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}",
                        created_ns=time.time_ns(), script=str(spec.script or spec.module or ""),
                        methods=tuple(methods), repeat=repeat, runs={k: list(v) for k, v in groups.items()})
    folder = series_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{entry.id}.tmp"
    tmp.write_text(json.dumps({"id": entry.id, "created_ns": entry.created_ns, "script": entry.script,
                               "methods": list(entry.methods), "repeat": entry.repeat, "runs": entry.runs}))
    os.replace(tmp, folder / f"{entry.id}.json")
    return entry


def load_series() -> list[SeriesEntry]:
    """Every readable series record, newest first."""
    out = []
    try:
        names = sorted(os.listdir(series_dir()))
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            out.append(SeriesEntry.from_dict(json.loads((series_dir() / name).read_text())))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue            # a damaged record: its runs stay listed one by one
    out.sort(key=lambda s: s.created_ns, reverse=True)
    return out
