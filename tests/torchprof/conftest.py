"""Running ``gpuscope run`` (real processes, real torch CPU, real torchrun) and reading its traces."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass
class Ran:
    """One ``gpuscope run --json``: exit status, the program's output lines, the run's JSON."""

    returncode: int
    lines: list[str]
    stderr: str
    record: dict[str, Any]

    @property
    def run_dir(self) -> Path:
        return Path(self.record["run_dir"])

    def traces(self, source: str = "gpuscope") -> list[dict[str, Any]]:
        return [t for t in self.record["torch_traces"] if t["source"] == source]


def gpuscope_run(env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 240) -> Ran:
    """``python -m gpuscope run -q --json ARGS``; the JSON is stdout's last line."""
    done = subprocess.run([sys.executable, "-m", "gpuscope", "run", "-q", "--json", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)
    out = done.stdout.splitlines()
    assert out, f"no output; stderr: {done.stderr[-3000:]}"
    return Ran(done.returncode, out[:-1], done.stderr, json.loads(out[-1]))


def trace_events(path: Path) -> list[dict[str, Any]]:
    """The complete ('X') events of a gzip Chrome trace (small test traces: a whole json.load)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def name_counts(path: Path) -> Counter[str]:
    """How often each event name occurs; optimizer steps counted under 'Optimizer.step'."""
    counts: Counter[str] = Counter()
    for event in trace_events(path):
        name = event["name"]
        counts["Optimizer.step" if name.startswith("Optimizer.step#") else name] += 1
    return counts
