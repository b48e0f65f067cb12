"""``gpuscope report`` of an attached run: what was seen, read back from its folder.

An attached run has no event logs or nsys export; its record (``summary.json``: the processes
with their roles, CPU and memory; the findings), its last stacks (``stacks/latest.json``) and its
profile (``profile.speedscope.json``) are what there is. Its samples are in the store
(``gpuscope monitor --run ID`` replays them).
"""

from __future__ import annotations

import os
from typing import Any

from gpuscope import rundir as layout
from gpuscope.attach.recording import KIND

PROFILE_FILE = "profile.speedscope.json"


def is_attached(folder: str | os.PathLike[str]) -> bool:
    """Whether the run folder holds a session of ``gpuscope attach``."""
    from gpuscope.runrecord.folder import read_json

    spec = read_json(os.path.join(folder, layout.SPEC)) or {}
    return spec.get("kind") == KIND


def report_json(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The attached run as JSON: its record, its last stacks and its profile's top functions."""
    from pathlib import Path

    from gpuscope.attach import profile
    from gpuscope.findings.stacks import load_latest
    from gpuscope.runrecord.folder import read_folder

    record = read_folder(folder)
    taken, stacks = load_latest(Path(folder))
    roles = {p.pid: p.role for p in record.processes}
    prof = os.path.join(folder, PROFILE_FILE)
    return {**record.to_json(), "kind": KIND, "root_pid": record.spec.get("root_pid"),
            "stacks": {"taken_ns": taken, "processes": [p.to_dict() for p in stacks]} if stacks else None,
            "profile": profile.read(prof, roles).to_dict() if os.path.isfile(prof) else None,
            "timeline": timeline_json(folder, roles)}


def timeline_json(folder: str | os.PathLike[str], roles: dict[int, str]) -> dict[str, Any] | None:
    """The profile's samples as lanes, one per process and thread (times on CLOCK_MONOTONIC ns);
    None when the run has no profile with times."""
    from gpuscope.attach import profile

    sampled = profile.read_ranges(profile.timeline_path(os.path.join(folder, PROFILE_FILE)))
    if sampled is None:
        return None
    lanes: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in sampled.ranges:
        lanes.setdefault((r.pid, r.tid), []).append(
            {"depth": r.depth, "name": r.name, "file": r.file, "line": r.line, "start_ns": r.start_ns,
             "end_ns": r.end_ns})
    return {"clock": "CLOCK_MONOTONIC", "start_ns": sampled.start_mono_ns, "end_ns": sampled.end_mono_ns,
            "start_wall_ns": sampled.start_wall_ns, "source": "cpu samples",
            "lanes": [{"pid": pid, "tid": tid, "role": roles.get(pid, "process"), "ranges": rows}
                      for (pid, tid), rows in sorted(lanes.items())]}


def report_text(folder: str | os.PathLike[str]) -> str:
    from pathlib import Path

    from gpuscope.finding import Finding
    from gpuscope.findings.stacks import group, load_latest

    data = report_json(folder)
    dur = data.get("duration_s")
    lines = [f"attached run {data['run_id']}: tree of pid {data.get('root_pid')}, {len(data['processes'])} "
             f"process(es), followed {dur if dur is not None else '?'} s ({data['status']})"]
    for p in data["processes"]:
        cmd = " ".join((p.get("info") or {}).get("cmdline") or [])
        rss = (p.get("peak_rss_bytes") or 0) / 2**20
        lines.append(f"  {p['pid']:>7} {p['role']:<22} cpu {p.get('cpu_seconds') or 0:7.2f} s  peak rss {rss:7.1f} MiB"
                     f"  {cmd[:70]}")
    lines += [Finding.from_dict(f).line() for f in data["findings"]]
    if data["stacks"]:
        _, procs = load_latest(Path(folder))
        lines += ["stacks (last read):", *(f"  {g}" for g in group(procs))]
    if data["profile"]:
        lines.append(f"profile: {data['profile']['samples']} samples, {data['profile']['path']}")
        if data["timeline"]:
            lanes = data["timeline"]["lanes"]
            lines.append(f"  timeline: {len(lanes)} lane(s) of sampled frames, "
                         f"{sum(len(ln['ranges']) for ln in lanes)} ranges ({data['profile'].get('timeline')})")
        for role, top in data["profile"]["top"].items():
            lines += [f"  {role}: {t['function']} ({os.path.basename(t['file'])}:{t['line']}) {t['share']:.0%}"
                      for t in top[:5]]
    lines += [f"note: {n}" for n in data.get("notes") or ()]
    lines.append(f"samples: gpuscope monitor --run {data['run_id']}")
    return "\n".join(lines)
