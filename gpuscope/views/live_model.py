"""What the live view plots and the process tree lists, fed by sampler batches (Qt-free).

``LiveModel.add(batch)`` runs on the GUI thread (the bridge hands batches over); it appends one
point per series and updates the latest row of each process. Values are the core's, unchanged:
units are those of :mod:`gpuscope.telemetry.metrics`. ``load_series`` fills the same structure
from a past run's stored samples, so the history reopens a run in the same plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscope.views.plot_buffers import SeriesBuffer
from gpuscope.views.procroles import tool_group
from gpuscope.trace.process_row import PROGRAM_ROLES, ProcessRow, display_name

# plot key -> (metric kind, metric key): the curves of each plot, per device, per process, or the
# total of a tool's processes ("group": Nsight Systems' own, drawn as one curve)
PLOTS = {
    "gpu_util": (("gpu", "util_gpu"), ("proc", "sm_util")),
    "gpu_mem": (("gpu", "mem_used"), ("proc", "gpu_mem")),
    "cpu": (("proc", "cpu"), ("group", "cpu")),
    "rss": (("proc", "rss"), ("group", "rss"), ("ray", "used"), ("ray", "spilled_bytes")),
}
# the Ray object store (gpuscope.telemetry.ray_store) in the memory plot: what it holds in memory,
# and the bytes it spilled to disk so far
RAY_KEYS = ("used", "spilled_bytes")
GROUP_KEYS = ("cpu", "rss")


@dataclass
class ProcRow:
    """The latest state of one process of the run, as the process tree shows it."""

    pid: int
    ppid: int
    name: str
    state: str = "?"
    cpu: float | None = None
    rss: int | None = None
    gpu_mem: int | None = None
    alive: bool = True
    role: str = ""
    rank: int | None = None
    group: str | None = None     # a tool's process (Nsight Systems), not the user's
    worker_id: int | None = None     # a DataLoader worker's id
    create_time: float | None = None     # when the sampler first saw it: the identity Stop/Kill check
    peak_rss: int | None = None      # the largest RSS sampled so far (the record's exact peak replaces it)
    exit_code: int | None = None     # once ended: its exit record, or its parent's reaping (< 0: signal)
    record: ProcessRow | None = None     # after the run: the run's row, as the CLI table prints it

    @property
    def user(self) -> bool:
        return self.group is None

    @property
    def display(self) -> str:
        """Its name in every view (:func:`gpuscope.trace.process_row.display_name`)."""
        return self.display_as(with_rank=True)

    def display_as(self, with_rank: bool) -> str:
        """The display name; without the rank where a table has a Rank column (as the CLI's)."""
        rec = self.record
        if rec is not None and rec.role not in ("unknown", ""):
            return display_name(rec.role, rec.worker_id, rec.rank if with_rank else None, rec.name)
        return display_name(self.role, self.worker_id, self.rank if with_rank else None, self.name)


class LiveModel:
    """Series and process rows of one run."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.t0_ns: int | None = None
        self.series: dict[tuple[str, str], dict[int, SeriesBuffer]] = {}
        self.procs: dict[int, ProcRow] = {}
        self.devices: dict[int, str] = {}
        self.gpu_reason: str | None = None
        self.notes: list[str] = []
        self.last_t = 0.0
        self.version = 0          # bumped on every change: views redraw only when it moved
        self.batches = 0
        self.groups: list[str] = []   # tool groups seen (their index is the curves' subject)
        self.create_times: dict[int, float] = {}   # pid -> create time (the sampler's StartedProc)
        self.finished = False         # the run's process rows are in (set_process_rows)

    def _buf(self, kind: str, key: str, subject: int) -> SeriesBuffer:
        per = self.series.setdefault((kind, key), {})
        buf = per.get(subject)
        if buf is None:
            buf = per[subject] = SeriesBuffer()
        return buf

    def add(self, batch: Any) -> None:
        """One :class:`gpuscope.telemetry.batch.SampleBatch`."""
        if self.t0_ns is None:
            self.t0_ns = batch.t_ns
        t = (batch.t_ns - self.t0_ns) / 1e9
        self.last_t = t
        for d in batch.devices:
            self.devices.setdefault(d.index, d.name or f"GPU {d.index}")
            self._buf("gpu", "util_gpu", d.index).append(t, d.util_gpu)
            self._buf("gpu", "mem_used", d.index).append(t, d.mem_used)
        for started in batch.started:
            self.create_times[started.pid] = started.create_time
            if started.pid in self.procs:
                self.procs[started.pid].create_time = started.create_time
        for p in batch.processes:
            zombie = p.state in ("Z", "X")   # exited, not yet reaped: its zero RSS is no measurement
            for key in ("cpu", "rss", "gpu_mem", "sm_util"):
                value = None if zombie else getattr(p, key)
                if value is not None or (("proc", key) in self.series and p.pid in self.series[("proc", key)]):
                    self._buf("proc", key, p.pid).append(t, value)
            row = self.procs.get(p.pid)
            if row is None:
                row = self.procs[p.pid] = ProcRow(p.pid, p.ppid, p.name, create_time=self.create_times.get(p.pid))
            row.ppid, row.name, row.state = p.ppid, p.name, p.state
            row.group = tool_group(p.name) if not row.role else None
            row.alive = not zombie
            if not zombie:
                row.cpu, row.rss, row.gpu_mem = p.cpu, p.rss, p.gpu_mem
                if p.rss and (row.peak_rss is None or p.rss > row.peak_rss):
                    row.peak_rss = p.rss
        for pid in batch.ended:
            row = self.procs.get(pid)
            if row is not None:
                row.alive, row.state, row.cpu = False, "ended", None
        self._add_group_totals(t)
        self.notes.extend(n for n in batch.notes if n not in self.notes)
        self.batches += 1
        self.version += 1

    def _add_group_totals(self, t: float) -> None:
        """One point per tool group: the sum of its live processes' CPU % and RSS."""
        totals: dict[str, dict[str, float]] = {}
        for row in self.procs.values():
            if row.group is not None and row.alive:
                acc = totals.setdefault(row.group, dict.fromkeys(GROUP_KEYS, 0.0))
                acc["cpu"] += row.cpu or 0.0
                acc["rss"] += row.rss or 0
        for group in totals.keys() - set(self.groups):
            self.groups.append(group)
        for i, group in enumerate(self.groups):
            found = totals.get(group)
            for key in GROUP_KEYS:
                self._buf("group", key, i).append(t, found[key] if found else float("nan"))

    def add_ray_store(self, samples: list[dict[str, int]]) -> None:
        """Object store samples of a Ray run (``ray_store.jsonl``; same clock as the batches)."""
        if not samples:
            return
        if self.t0_ns is None:
            self.t0_ns = samples[0]["t_ns"]
        for sample in samples:
            t = (sample["t_ns"] - self.t0_ns) / 1e9
            for key in RAY_KEYS:
                self._buf("ray", key, 0).append(t, sample[key])
            self.last_t = max(self.last_t, t)
        self.version += 1

    def group_total(self, group: str) -> tuple[int, float, int]:
        """(live processes, CPU %, RSS bytes) of a tool group now."""
        rows = [r for r in self.procs.values() if r.group == group and r.alive]
        return len(rows), sum(r.cpu or 0.0 for r in rows), sum(r.rss or 0 for r in rows)

    def set_identities(self, ids: dict[int, Any], exits: dict[int, int] | None = None) -> bool:
        """Roles and ranks from the event logs (:class:`gpuscope.views.procroles.Identity`), and the
        exit statuses known so far (:attr:`gpuscope.views.procroles.RoleReader.exits`)."""
        changed = False
        for pid, ident in ids.items():
            row = self.procs.get(pid)
            role = ident.role
            if role == "fork child" and row is not None and row.name and not row.name.startswith("gs:"):
                # a fork child that exec'd a program that is not Python (Ray's gcs_server, raylet):
                # named by the program, as its row after the run (trace/process_rows.py)
                role = PROGRAM_ROLES.get(row.name, row.name)
            worker = getattr(ident, "worker_id", None)
            if row is not None and (row.role, row.rank, row.worker_id) != (role, ident.rank, worker):
                row.role, row.rank, row.worker_id, row.group = role, ident.rank, worker, None   # the user's
                changed = True
        for pid, code in (exits or {}).items():
            row = self.procs.get(pid)
            if row is not None and row.exit_code != code:
                row.exit_code = code
                changed = True
        if changed:
            self.version += 1
        return changed

    def set_process_rows(self, rows: Sequence[ProcessRow | dict[str, Any]], left_running: Any = ()) -> None:
        """The run's process rows (``RunResult.processes``, summary.json): each process's exit,
        CPU time and peak RSS as ``gpuscope run`` prints them; its row is ended unless it is one
        of ``left_running`` (alive after the run: ``RunResult.left_running``). A process the
        sampler never saw (it lived less than a tick) gets a row too."""
        from gpuscope.trace.process_row import as_row

        alive = set(left_running)
        for rec in map(as_row, rows):
            row = self.procs.get(rec.pid)
            if row is None:
                row = self.procs[rec.pid] = ProcRow(rec.pid, rec.ppid or 0, rec.name or "", "ended", alive=False,
                                                    group=tool_group(rec.name) if not rec.injected else None)
            row.record = rec
            if rec.injected:
                row.role, row.rank, row.worker_id, row.group = rec.role, rec.rank, rec.worker_id, None
            if rec.pid in alive:    # still alive after the run: not ended
                continue
            row.alive, row.state, row.cpu = False, "ended", None
        self.finished = True
        self.version += 1

    def curves(self, plot: str, tools: bool = False) -> list[tuple[str, str, int, SeriesBuffer]]:
        """(kind, key, subject, buffer) of one plot's curves, devices first. A tool's processes
        (Nsight Systems) are one total curve; with ``tools`` each of them is drawn too."""
        out = []
        for kind, key in PLOTS[plot]:
            for subject, buf in sorted(self.series.get((kind, key), {}).items()):
                if kind != "gpu" and not np.isfinite(buf.y).any():
                    continue
                if kind == "proc" and not tools and not self._user(subject):
                    continue
                out.append((kind, key, subject, buf))
        return out

    def _user(self, pid: int) -> bool:
        row = self.procs.get(pid)
        return row is None or row.user

    # -- a past run ----------------------------------------------------------------------------
    def load_series(self, data: dict[str, Any], identities: dict[int, Any] | None = None) -> None:
        """Fill from :func:`gpuscope.telemetry.series.load_series` (a stored run)."""
        self.reset()
        starts = [int(v["t_ns"][0]) for group in ("gpus", "processes") for v in data[group].values()
                  if len(v["t_ns"])]
        if len(data["host"]["t_ns"]):
            starts.append(int(data["host"]["t_ns"][0]))
        self.t0_ns = min(starts) if starts else 0
        for dev, cols in data["gpus"].items():
            x = (cols["t_ns"] - self.t0_ns) / 1e9
            self.devices[int(dev)] = f"GPU {dev}"
            for key in ("util_gpu", "mem_used"):
                self._buf("gpu", key, int(dev)).extend(x, cols[key])
        for pid, cols in data["processes"].items():
            x = (cols["t_ns"] - self.t0_ns) / 1e9
            for key in ("cpu", "rss", "gpu_mem", "sm_util"):
                if np.isfinite(cols[key]).any():
                    self._buf("proc", key, int(pid)).extend(x, cols[key])
            self.last_t = max(self.last_t, float(x[-1]) if len(x) else 0.0)
        for pid, s in data.get("process_info", {}).items():
            name = s.get("name") or ""
            self.procs[int(pid)] = ProcRow(int(pid), s.get("ppid") or 0, name, s.get("state") or "?",
                                           None, s.get("peak_rss_bytes"), s.get("peak_gpu_mem_bytes"), False,
                                           group=tool_group(name))
        gpu_info = (data.get("info") or {}).get("gpu")
        self.gpu_reason = gpu_info or None if not data["gpus"] else None
        self.notes = list(data.get("notes") or [])
        if identities:
            self.set_identities(identities)
        self.version += 1


def read_process_rows(run_dir: Any) -> tuple[list[ProcessRow], list[int]]:
    """A finished run's process rows and the pids left running, from its record
    (``gpuscope.runrecord``); ([], []) when the run wrote none."""
    import os

    from gpuscope import rundir as layout
    from gpuscope.runrecord import read_folder

    if not os.path.isfile(os.path.join(run_dir, layout.SUMMARY)):
        return [], []
    record = read_folder(run_dir)
    return record.processes, record.left_running
