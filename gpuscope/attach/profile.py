"""A CPU profile of a whole attached tree: ``py-spy record --subprocesses`` for N seconds.

The samples are kept as speedscope JSON (opens in https://www.speedscope.app, or the app's flame
graph); :func:`top_functions` sums them per role: the functions where the samples were taken
(self time), largest first. py-spy samples without pausing the processes (``--nonblocking``).

A second py-spy writes the same window as a Chrome trace (``<name>.chrometrace.json``: begin/end
events per process and thread, consecutive samples of one frame merged, times from py-spy's start);
:func:`read_ranges` puts them on CLOCK_MONOTONIC, as lanes for the report's timeline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from gpuscope.errors import UserError

RATE_HZ = 100
_PROFILE_NAME = re.compile(r"Process (\d+)")
_ANCESTRY = re.compile(r"^process \d+:")    # --subprocesses roots each stack in its process chain
_THREAD = re.compile(r"^thread \((\d+)\)")   # --threads roots it in its thread's OS id
_SPEEDSCOPE = ".speedscope.json"
TIMELINE_SUFFIX = ".chrometrace.json"


@dataclass(frozen=True)
class SampledRange:
    """One frame at one depth of a thread's sampled stacks, over consecutive samples (CLOCK_MONOTONIC ns)."""

    pid: int
    tid: int
    depth: int              # 0 = outermost Python frame
    name: str
    file: str
    line: int
    start_ns: int
    end_ns: int


@dataclass
class SampledTimeline:
    """The profile's window (py-spy's start on CLOCK_MONOTONIC and the wall clock) and its ranges."""

    start_mono_ns: int
    start_wall_ns: int
    end_mono_ns: int
    ranges: list[SampledRange] = field(default_factory=list)


@dataclass(frozen=True)
class TopFunction:
    """A function where a role's samples were most often, with its share of them."""

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
    timeline: str = ""      # the Chrome trace of the same window ("" when none was written)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "seconds": self.seconds, "samples": self.samples, "note": self.note,
                "timeline": self.timeline,
                "per_pid": {str(k): v for k, v in self.per_pid.items()},
                "top": {role: [t.to_dict() for t in rows] for role, rows in self.top.items()}}


def record(root_pid: int, seconds: float, out_path: str, roles: dict[int, str], *, rate_hz: int = RATE_HZ,
           idle: bool = False) -> Profile:
    """Sample the tree rooted at ``root_pid`` for ``seconds`` into ``out_path`` (speedscope JSON)."""
    from gpuscope.attach.stacks import reader_tool

    tool = reader_tool()
    if tool is None or tool[0] != "py-spy":
        raise UserError("a profile needs py-spy (pip install py-spy)")
    common = ["--pid", str(root_pid), "--subprocesses", "--duration", str(max(1, round(seconds))),
              "--rate", str(rate_hz), "--nonblocking", *(["--idle"] if idle else [])]
    trace_path = timeline_path(out_path)
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(subprocess.Popen([tool[1], "record", "--format", "speedscope", "--output", out_path, *common],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        # the Chrome trace's times count from its py-spy's start: take the clocks just before it
        start_mono, start_wall = time.monotonic_ns(), time.time_ns()
        procs.append(subprocess.Popen([tool[1], "record", "--format", "chrometrace", "--threads", "--output",
                                       trace_path, *common],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=seconds + 30)[1] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        return Profile(out_path, seconds, note="py-spy did not finish")
    proc = procs[0]
    prof = read(out_path, roles, seconds)
    if _stamp(trace_path, start_mono, start_wall, rate_hz):
        prof.timeline = trace_path
    if not prof.samples and proc.returncode != 0:
        lines = [ln for ln in (outs[0] or "").splitlines() if ln.strip()]
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
    trace = timeline_path(path)
    return Profile(path, seconds, total, top, per_pid, timeline=trace if os.path.isfile(trace) else "")


def timeline_path(speedscope_path: str) -> str:
    """Where the Chrome trace of a profile written to ``speedscope_path`` goes."""
    return speedscope_path.removesuffix(_SPEEDSCOPE).removesuffix(".json") + TIMELINE_SUFFIX


def _stamp(trace_path: str, start_mono: int, start_wall: int, rate_hz: int) -> bool:
    """Add the clocks of py-spy's start to its Chrome trace (object form, still a valid trace)."""
    try:
        with open(trace_path, encoding="utf-8") as fh:
            events = json.load(fh)
        if isinstance(events, dict):
            events = events.get("traceEvents", [])
        doc = {"traceEvents": events, "displayTimeUnit": "ms",
               "otherData": {"start_mono_ns": start_mono, "start_wall_ns": start_wall, "rate_hz": rate_hz}}
        tmp = trace_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, trace_path)
    except (OSError, ValueError):
        return False
    return True


def read_ranges(trace_path: str) -> SampledTimeline | None:
    """The sampled stacks of a profile's Chrome trace as ranges per thread and depth (None: no trace)."""
    try:
        with open(trace_path, encoding="utf-8") as fh:
            doc = json.load(fh)
        other = doc["otherData"]
        start_mono, start_wall = int(other["start_mono_ns"]), int(other["start_wall_ns"])
        events = list(doc["traceEvents"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # py-spy pairs begin/end by its thread handle alone, which forked processes share: pair the
    # same way, and take each frame's process from its begin event
    open_frames: dict[int, list[tuple[dict[str, Any], int, int]]] = {}
    ranges: list[SampledRange] = []
    last = start_mono
    for ev in events:
        ph = ev.get("ph")
        if ph not in ("B", "E"):
            continue
        t = start_mono + int(float(ev.get("ts") or 0) * 1000)
        last = max(last, t)
        stack = open_frames.setdefault(int(ev.get("tid") or 0), [])
        if ph == "B":
            plain = not (ev.get("args") or {}).get("filename")
            thread = _THREAD.match(str(ev.get("name"))) if plain else None
            is_process = plain and (thread is not None or bool(_ANCESTRY.match(str(ev.get("name")))))
            if thread is not None:
                ev = {**ev, "_tid": int(thread.group(1))}
            depth = sum(1 for f in stack if not f[0]["_process"])   # Python frames below this one
            stack.append(({**ev, "_process": is_process}, t, depth))
            continue
        if not stack:
            continue
        ev_b, t0, depth = stack.pop()
        if ev_b["_process"]:
            continue
        args = ev_b.get("args") or {}
        pid = int(ev_b.get("pid") or 0)
        # the OS thread id from the --threads root frame; py-spy's own tid is the pthread handle
        tid = next((f[0]["_tid"] for f in reversed(stack) if "_tid" in f[0]), pid)
        ranges.append(SampledRange(pid, tid, depth, str(ev_b.get("name") or "?"), str(args.get("filename") or ""),
                                   int(args.get("line") or 0), t0, max(t, t0)))
    rate = int(other.get("rate_hz") or RATE_HZ)
    return SampledTimeline(start_mono, start_wall, last, merged(ranges, 2 * 1_000_000_000 // max(1, rate)))


def merged(ranges: list[SampledRange], gap_ns: int) -> list[SampledRange]:
    """Join a thread's ranges of one frame at one depth that follow each other within ``gap_ns``
    (samples of other processes on the same py-spy thread handle split them)."""
    out: list[SampledRange] = []
    open_at: dict[tuple[int, int, int], int] = {}      # (pid, tid, depth) -> index in out
    for r in sorted(ranges, key=lambda r: (r.start_ns, r.depth)):
        key = (r.pid, r.tid, r.depth)
        k = open_at.get(key, -1)
        prev = out[k] if k >= 0 else None
        if prev is not None and (prev.name, prev.file, prev.line) == (r.name, r.file, r.line) \
                and r.start_ns - prev.end_ns <= gap_ns:
            out[k] = SampledRange(r.pid, r.tid, r.depth, r.name, r.file, r.line, prev.start_ns,
                                  max(prev.end_ns, r.end_ns))
            continue
        open_at[key] = len(out)
        out.append(r)
    out.sort(key=lambda r: (r.pid, r.tid, r.start_ns, r.depth))
    return out
