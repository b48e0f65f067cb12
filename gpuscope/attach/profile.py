"""A CPU profile of a whole attached tree: ``py-spy record --subprocesses`` for N seconds.

The samples are kept as speedscope JSON (opens in https://www.speedscope.app, or the app's flame
graph); :func:`top_functions` sums them per role: the functions where the samples were taken
(self time), largest first. py-spy samples without pausing the processes (``--nonblocking``).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any

from gpuscope.errors import UserError

RATE_HZ = 100
_PROFILE_NAME = re.compile(r"Process (\d+)")


@dataclass(frozen=True)
class TopFunction:
    function: str
    file: str
    line: int
    samples: int
    share: float            # of the role's samples

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "file": self.file, "line": self.line, "samples": self.samples,
                "share": round(self.share, 4)}


@dataclass
class Profile:
    """Where a profile's samples are (``path``: speedscope JSON) and the top functions per role."""

    path: str
    seconds: float
    samples: int = 0
    top: dict[str, list[TopFunction]] = field(default_factory=dict)
    per_pid: dict[int, int] = field(default_factory=dict)      # samples per process
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "seconds": self.seconds, "samples": self.samples, "note": self.note,
                "per_pid": {str(k): v for k, v in self.per_pid.items()},
                "top": {role: [t.to_dict() for t in rows] for role, rows in self.top.items()}}


def record(root_pid: int, seconds: float, out_path: str, roles: dict[int, str], *, rate_hz: int = RATE_HZ,
           idle: bool = False) -> Profile:
    """Sample the tree rooted at ``root_pid`` for ``seconds`` into ``out_path`` (speedscope JSON)."""
    from gpuscope.attach.stacks import reader_tool

    tool = reader_tool()
    if tool is None or tool[0] != "py-spy":
        raise UserError("a profile needs py-spy (pip install py-spy)")
    argv = [tool[1], "record", "--pid", str(root_pid), "--subprocesses", "--format", "speedscope",
            "--output", out_path, "--duration", str(max(1, round(seconds))), "--rate", str(rate_hz),
            "--nonblocking", *(["--idle"] if idle else [])]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        return Profile(out_path, seconds, note="py-spy did not finish")
    prof = read(out_path, roles, seconds)
    if not prof.samples and proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
        prof.note = (lines[0] if lines else f"py-spy exit status {proc.returncode}").removeprefix("Error: ")[:200]
    return prof


def read(path: str, roles: dict[int, str], seconds: float = 0.0, top_n: int = 10) -> Profile:
    """A speedscope file written by py-spy, summed per role (pid -> role from ``roles``)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return Profile(path, seconds, note="no profile was written")
    frames = data.get("shared", {}).get("frames", [])
    counts: dict[str, dict[int, int]] = {}
    per_pid: dict[int, int] = {}
    total = 0
    for prof in data.get("profiles", []):
        m = _PROFILE_NAME.search(str(prof.get("name", "")))
        pid = int(m.group(1)) if m else 0
        role = roles.get(pid, "process")
        for stack in prof.get("samples", []):    # one per sample (py-spy's weights are its interval)
            if not stack:
                continue
            leaf = stack[-1]                      # speedscope stacks run from the root to the leaf
            n = 1
            counts.setdefault(role, {})[leaf] = counts.get(role, {}).get(leaf, 0) + n
            per_pid[pid] = per_pid.get(pid, 0) + n
            total += n
    top: dict[str, list[TopFunction]] = {}
    for role, by_frame in counts.items():
        all_n = sum(by_frame.values()) or 1
        best = sorted(by_frame.items(), key=lambda kv: -kv[1])[:top_n]
        top[role] = [TopFunction(str(frames[i].get("name", "?")), str(frames[i].get("file", "")),
                                 int(frames[i].get("line") or 0), n, n / all_n) for i, n in best if i < len(frames)]
    return Profile(path, seconds, total, top, per_pid)
