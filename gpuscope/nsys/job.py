"""A torchrun job across nodes: the node runs in a job folder merged into one report.

Each node's ``gpuscope run --job-dir DIR`` left ``DIR/node<K>-<host>-<run id>/`` with its event
logs, its nsys report when it recorded with ``--nsys``, and ``node.json`` (written last by
``gpuscope.runs.recorders.node_job``: job id, host, node rank, a (wall, monotonic) anchor, the
clock offset to node 0 and the process rows). :func:`load_job` reads every node, moves each onto
node 0's clock and merges them (``gpuscope.trace.merge``): one timeline whose processes are
grouped per node, a per-rank table, the stragglers and the clock offsets with their residuals.

Clock alignment, per node K: an event at monotonic time ``m`` (all processes of a host share
CLOCK_MONOTONIC) happened at ``anchor_wall + (m - anchor_mono) - offset(m)`` on node 0's clock,
where ``offset(m)`` is the offset measured at start, moved linearly towards the one measured at
the end (the clocks' drift) when the node has both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gpuscope.errors import UserError
from gpuscope.trace import timeline as T

NODE_FILE = "node.json"


@dataclass
class NodeRun:
    """One node's run folder in a job across nodes, with its ``node.json``."""

    folder: Path
    meta: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def node_rank(self) -> int:
        return int(self.meta.get("node_rank", 0))

    @property
    def host(self) -> str:
        return str(self.meta.get("host") or "?")

    @property
    def clock(self) -> dict[str, Any]:
        return self.meta.get("clock") or {}

    @property
    def offset_ns(self) -> int:
        return int(self.clock.get("offset_ns") or 0)


def is_job_dir(path: Path) -> bool:
    """A folder holding node runs (``*/node.json``), not itself a run folder."""
    if not path.is_dir() or (path / "events").is_dir():
        return False
    return any(path.glob(f"*/{NODE_FILE}"))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def meta_problem(meta: Any) -> str | None:
    """What keeps ``node.json`` from being read as the node recorder writes it, or None."""
    if not isinstance(meta, dict):
        return "not a JSON object"
    for key in ("node_rank", "nnodes"):
        if meta.get(key) is not None and not _is_int(meta[key]):
            return f"{key} is not an integer"
    for key in ("anchor", "clock", "clock_end"):
        part = meta.get(key)
        if part is None:
            continue
        if not isinstance(part, dict):
            return f"{key} is not an object"
        bad = [k for k in ("wall_ns", "mono_ns", "offset_ns") if part.get(k) is not None and not _is_int(part[k])]
        if bad:
            return f"{key}.{bad[0]} is not an integer"
    anchor, end = meta.get("anchor") or {}, meta.get("clock_end") or {}
    if anchor.get("wall_ns") is not None and anchor.get("mono_ns") is None:
        return "anchor.mono_ns is missing"
    if end and not end.get("error") and end.get("offset_ns") is None:
        return "clock_end.offset_ns is missing"
    procs = meta.get("processes") or []
    if not isinstance(procs, list):
        return "processes is not a list"
    for row in procs:
        if not isinstance(row, dict) or not _is_int(row.get("pid")) or not (row.get("rank") is None
                                                                             or _is_int(row["rank"])):
            return "a process without an integer pid or rank"
        names = row.get("range_names") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return "range_names is not a list of names"
    return None


def read_nodes(job_dir: Path, job_id: str | None = None) -> tuple[str, list[NodeRun], list[str]]:
    """(job id, node runs by node rank, notes). One job per folder unless ``job_id`` picks one."""
    found: dict[str, list[NodeRun]] = {}
    for meta_file in sorted(job_dir.glob(f"*/{NODE_FILE}")):
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{meta_file}: unreadable node record ({exc})") from None
        problem = meta_problem(meta)
        if problem is not None:
            raise UserError(f"{meta_file}: not a node record gpuscope wrote ({problem}); is it damaged?")
        found.setdefault(str(meta.get("job_id")), []).append(NodeRun(meta_file.parent, meta))
    if not found:
        raise UserError(f"{job_dir}: no node runs here (gpuscope run --job-dir {job_dir} ... on each node)")
    if job_id is None and len(found) > 1:
        raise UserError(f"{job_dir} holds node runs of several jobs ({', '.join(sorted(found))}): "
                        "pick one with --job ID")
    job_id = job_id if job_id is not None else next(iter(found))
    if job_id not in found:
        raise UserError(f"{job_dir}: no node runs of job {job_id!r} (found {', '.join(sorted(found))})")
    notes: list[str] = []
    by_rank: dict[int, NodeRun] = {}
    for node in sorted(found[job_id], key=lambda n: ((n.meta.get("anchor") or {}).get("wall_ns") or 0)):
        if node.node_rank in by_rank:
            notes.append(f"node {node.node_rank}: two runs in this folder; the later one is shown "
                         f"({node.folder.name}, not {by_rank[node.node_rank].folder.name})")
        by_rank[node.node_rank] = node
    nodes = [by_rank[k] for k in sorted(by_rank)]
    nnodes = max(int(n.meta.get("nnodes") or 1) for n in nodes)
    missing = sorted(set(range(nnodes)) - set(by_rank))
    if missing:
        notes.append(f"node(s) {', '.join(map(str, missing))} of {nnodes} missing: not finished, "
                     "or ended before copying their run")
    return job_id, nodes, notes


def _node_timeline(node: NodeRun, load_export: Callable[[Path, Path], Any]) -> tuple[T.Timeline, Any]:
    """The node's Timeline (its nsys export with coverage, else its event logs) and its nsys report."""
    from gpuscope.trace import coverage

    export = coverage.find_export(node.folder)
    if export is not None:
        rep = load_export(export, node.folder)
        return rep.timeline, rep
    logs = coverage.read_events(node.folder)
    if not logs:
        node.notes.append(f"node {node.node_rank}: no event logs and no nsys export in {node.folder}")
    return coverage.timeline_from_events(logs), None


def _zero_on_reference(node: NodeRun, tl: T.Timeline) -> int | None:
    """Node 0's wall-clock time (epoch ns) of this node timeline's ``t = 0`` (at the start's offset)."""
    anchor = node.meta.get("anchor") or {}
    if tl.mono_base_ns is not None and anchor.get("wall_ns") is not None:
        return int(anchor["wall_ns"]) + (int(tl.mono_base_ns) - int(anchor["mono_ns"])) - node.offset_ns
    if tl.wall_base_ns is not None:
        return int(tl.wall_base_ns) - node.offset_ns
    return None


def drift(node: NodeRun, tl: T.Timeline) -> tuple[float, int]:
    """(slope, pivot): the offset grows by ``slope`` ns per ns of the node's clock from the start
    exchange (at timeline time ``pivot``) to the end one; (0, 0) without both exchanges."""
    c0, c1 = node.clock, node.meta.get("clock_end") or {}
    if c0.get("error") or c1.get("error") or c0.get("mono_ns") is None or c1.get("mono_ns") is None:
        return 0.0, 0
    span = int(c1["mono_ns"]) - int(c0["mono_ns"])
    anchor = node.meta.get("anchor") or {}
    if tl.mono_base_ns is not None:
        mono_zero = int(tl.mono_base_ns)
    elif tl.wall_base_ns is not None and anchor.get("wall_ns") is not None:
        mono_zero = int(anchor["mono_ns"]) + int(tl.wall_base_ns) - int(anchor["wall_ns"])
    else:
        return 0.0, 0
    if span <= 0:
        return 0.0, 0
    return (int(c1["offset_ns"]) - int(c0["offset_ns"])) / span, int(c0["mono_ns"]) - mono_zero


def merge_job(job_dir: Path, load_export: Callable[[Path, Path], Any], *, job_id: str | None = None,
              step: str | None = None) -> dict[str, Any]:
    """The fields of the merged :class:`gpuscope.nsys.report.Report` of a job folder (``job`` says the
    rest); ``load_export(export, node_folder)`` opens a node's nsys export (``load_report``)."""
    from gpuscope.trace import merge, summary

    job_id, nodes, notes = read_nodes(job_dir, job_id)
    loaded = [(node, *_node_timeline(node, load_export)) for node in nodes]
    zeros = [_zero_on_reference(node, tl) for node, tl, _ in loaded]
    base = min((z for z in zeros if z is not None), default=0)
    merged = merge.merge([(tl, (z - base) if z is not None else 0, *drift(node, tl))
                          for (node, tl, _), z in zip(loaded, zeros)])
    tl = merged.timeline
    tl.wall_base_ns, tl.mono_base_ns = base, None
    tl.groups = {}
    pid_rank: dict[int, int] = {}
    who: dict[int, tuple[NodeRun, dict]] = {}
    for index, (node, _, _) in enumerate(loaded):
        rows = {int(p["pid"]): p for p in node.meta.get("processes") or []}
        for (part, pid), new in merged.pid_of.items():
            if part != index:
                continue
            row = rows.get(pid, {"pid": pid})
            who[new] = (node, row)
            tl.groups[new] = f"node {node.node_rank} · {node.host}"
            if row.get("rank") is not None:
                pid_rank[new] = int(row["rank"])
            hit = np.flatnonzero(tl.processes.pid == new)
            if len(hit):
                tl.processes.name_id[hit[0]] = tl.strings.intern(_lane_name(node, row, tl.process_name(new)))
    first_rep = next((rep for _, _, rep in loaded if rep is not None), None)
    naming = getattr(first_rep, "naming", "plain")
    # NVTX: every range once, whoever recorded it (nsys on nodes that ran under --nsys, gpuscope's
    # own records elsewhere and for processes nsys missed), as for one run folder (trace.coverage)
    sums = summary.all_summaries(tl, naming=naming) if first_rep is not None else {"kernel": [], "osrt": []}
    sums["nvtx"] = summary.nvtx_summary(tl, naming, source=None)
    processes = []
    for row in summary.process_table(tl):
        owner: NodeRun | None
        owner, prow = who.get(row["pid"], (None, {}))
        row = dict(row, timeline_pid=row["pid"], pid=int(prow.get("pid", row["pid"])),
                   rank=prow.get("rank"), role=prow.get("role"),
                   node={"host": owner.host, "node_rank": owner.node_rank} if owner else None)
        processes.append(row)
    stragglers = merge.step_stats(tl, pid_rank, step)
    job = _job_dict(job_dir, job_id, loaded, tl, pid_rank, who, stragglers)
    for node, _, _ in loaded:
        notes.extend(node.notes)
        if node.clock.get("error"):
            notes.append(f"node {node.node_rank}: clock offset not measured ({node.clock['error']}); "
                         "its wall clock is taken as it is")
        rep = next(r for n, _, r in loaded if n is node)
        if rep is not None:
            notes.extend(f"node {node.node_rank}: {n}" for n in rep.notes)
    return dict(path=job_dir, sqlite_path=None, nsys_version=getattr(first_rep, "nsys_version", None),
                  schema_version=getattr(first_rep, "schema_version", None),
                  naming=getattr(first_rep, "naming", "plain"), summaries=sums, processes=processes,
                  findings=[f for _, _, rep in loaded if rep is not None for f in rep.findings],
                  notes=notes, loaded=tl, job=job)


def _lane_name(node: NodeRun, row: dict, current: str) -> str:
    what = f"rank {row['rank']}" if row.get("rank") is not None else (row.get("role") or current)
    return f"node {node.node_rank} {what} · pid {row.get('pid', '?')} · {node.host}"


def _job_dict(job_dir: Path, job_id: str, loaded: list, tl: T.Timeline, pid_rank: dict[int, int],
              who: dict, stragglers: dict | None) -> dict[str, Any]:
    from gpuscope.trace.merge import pid_extents

    extents = pid_extents(tl)
    step_rows = {x["rank"]: x for x in (stragglers or {}).get("ranks", [])}
    ranks = []
    for new, rank in sorted(pid_rank.items(), key=lambda kv: kv[1]):
        node, row = who[new]
        count, first, last = extents.get(new, (0, None, None))
        ranks.append({"rank": rank, "node": {"host": node.host, "node_rank": node.node_rank},
                      "pid": int(row.get("pid", new)), "ranges": count,
                      "range_names": sorted(row.get("range_names") or []),
                      "first_ns": first, "last_ns": last,
                      "exit_code": row.get("exit_code"),
                      "step": step_rows.get(rank)})
    nodes = []
    for node, _, rep in loaded:
        clock, end = node.clock, node.meta.get("clock_end") or {}
        drifted = not clock.get("error") and end and not end.get("error")
        nodes.append({"node_rank": node.node_rank, "host": node.host, "run_id": node.meta.get("run_id"),
                      "folder": str(node.folder), "exit_code": node.meta.get("exit_code"),
                      "ranks": sorted(int(p["rank"]) for p in node.meta.get("processes") or []
                                      if p.get("rank") is not None),
                      "clock_offset_ns": int(clock.get("offset_ns") or 0),
                      "clock_residual_ns": clock.get("residual_ns"), "clock_reference": clock.get("reference"),
                      "clock_error": clock.get("error"),
                      "clock_drift_ns": int(end["offset_ns"]) - int(clock.get("offset_ns") or 0) if drifted else None,
                      "clock_end_residual_ns": end.get("residual_ns") if drifted else None,
                      "nsys": str(rep.sqlite_path) if rep is not None else None})
    residuals = [n["clock_residual_ns"] for n in nodes if n["clock_residual_ns"] is not None]
    return {"dir": str(job_dir), "job_id": job_id,
            "nnodes": max((int(n.meta.get("nnodes") or 1) for n, _, _ in loaded), default=0),
            "nodes": nodes, "clock_residual_max_ns": max(residuals) if residuals else None,
            "ranks": ranks, "stragglers": stragglers, "wall_base_ns": tl.wall_base_ns}
