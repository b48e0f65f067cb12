"""``--torch-profile``: the hook's setting in, the processes' torch traces out.

``prepare`` gives the run's processes ``GPUSCOPE_TORCH_PROFILE`` (inject/torchprof.py reads it
when a process imports torch); ``finish`` reads the meta files the processes wrote in
``<run>/torch/``, lists their traces as the run's ``torch_traces``, copies the traces the program
exported itself into the run folder, and says in the run's notes which process lost its trace and
why. docs/TORCH-PROFILER.md.
"""

from __future__ import annotations

import gzip
import os
import shutil
from typing import TYPE_CHECKING, Any

from gpuscope.runrecord.folder import read_json
from gpuscope.runrecord.model import TorchTraceFile
from gpuscope.runs.recorder import BaseRecorder

if TYPE_CHECKING:
    from gpuscope.runs.recorder import Launch, Outcome
    from gpuscope.trace.process_row import ProcessRow

ENV = "GPUSCOPE_TORCH_PROFILE"     # as inject/torchprof.py
FOLDER = "torch"
META_SUFFIX = ".meta.json"


class TorchProfileRecorder(BaseRecorder):
    name = "torch profiler"

    def __init__(self) -> None:
        self._folder = ""

    def prepare(self, launch: Launch) -> None:
        launch.env[ENV] = launch.spec.torch_profile.env_value()
        self._folder = launch.run_folder

    def finish(self, outcome: Outcome) -> None:
        if not outcome.launched or not self._folder:
            return
        traces, notes = collect(self._folder, outcome.processes)
        outcome.torch_traces = traces
        for note in notes:
            if note not in outcome.notes:
                outcome.notes.append(note)
        if not traces and not notes:
            outcome.notes.append("torch profiler: no process of the run imported torch (nothing profiled)")


def collect(run_folder: str, processes: list[ProcessRow]) -> tuple[list[TorchTraceFile], list[str]]:
    """The run's torch traces and the notes about them (one line each), from its meta files."""
    folder = os.path.join(run_folder, FOLDER)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(META_SUFFIX))
    except OSError:
        return [], []
    rows = {row.pid: row for row in processes}
    traces: list[TorchTraceFile] = []
    notes: list[str] = []
    for name in names:
        meta = read_json(os.path.join(folder, name))
        if meta is None:
            notes.append(f"torch profiler: {FOLDER}/{name} is unreadable; that process's trace is not listed")
            continue
        who = _who(meta)
        for entry in meta.get("traces") or ():
            _add_own(run_folder, meta, entry, who, traces, notes)
        for problem in meta.get("problems") or ():
            notes.append(f"torch profiler: {who}: {problem}")
        if meta.get("state") == "recording":
            notes.append(f"torch profiler: {who} lost its trace: {_why_lost(rows.get(int(meta.get('pid') or 0)))}")
        for k, entry in enumerate(meta.get("program_traces") or (), 1):
            _add_program(run_folder, name[:-len(META_SUFFIX)], k, meta, entry, who, traces, notes)
    return traces, notes


def _who(meta: dict[str, Any]) -> str:
    rank, pid = meta.get("rank"), meta.get("pid")
    return f"rank {rank} (pid {pid})" if rank is not None else f"{meta.get('role') or 'process'} (pid {pid})"


def _why_lost(row: ProcessRow | None) -> str:
    """Why a process that started profiling never saved: how it ended, as its row says."""
    if row is None:
        return "it ended without saving it (gpuscope has no record of how it ended)"
    if row.exit_signal:
        return f"killed by {row.exit_signal} before it could save it"
    if row.clean_exit is False:
        return "it ended without running its exit handlers (killed, or a crash)"
    return f"it ended ({row.exit_how or 'exit'}) without saving it"


def _add_own(run_folder: str, meta: dict[str, Any], entry: dict[str, Any], who: str,
             traces: list[TorchTraceFile], notes: list[str]) -> None:
    path = f"{FOLDER}/{entry.get('file')}"
    if entry.get("error"):
        notes.append(f"torch profiler: {who}: saving its trace failed: {entry['error']}")
        return
    if not os.path.isfile(os.path.join(run_folder, path)):
        notes.append(f"torch profiler: {who}: its trace {path} is missing")
        return
    traces.append(TorchTraceFile(path=path, pid=int(meta.get("pid") or 0), rank=meta.get("rank"),
                                 events=entry.get("events"), clock_offset_ns=entry.get("clock_offset_ns"),
                                 clock_uncertainty_ns=entry.get("clock_uncertainty_ns"),
                                 clock_method=entry.get("clock_method"), cycle=int(entry.get("cycle") or 1),
                                 role=meta.get("role")))


def _add_program(run_folder: str, stem: str, k: int, meta: dict[str, Any], entry: dict[str, Any], who: str,
                 traces: list[TorchTraceFile], notes: list[str]) -> None:
    """A trace the program exported: copied (gzip) into the run folder, where the run keeps it."""
    source = str(entry.get("path") or "")
    path = f"{FOLDER}/{stem}.program{k}.json.gz"
    try:
        with open(source, "rb") as fin, open(os.path.join(run_folder, path), "wb") as raw:
            if source.endswith(".gz"):
                shutil.copyfileobj(fin, raw, 1 << 20)
            else:
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
    except OSError as exc:
        notes.append(f"torch profiler: {who}: the program's trace {source} could not be copied: "
                     f"{exc.strerror or exc}")
        return
    if entry.get("unstopped"):   # gpuscope wrote it in the run folder at exit: the gzip copy replaces it
        try:
            os.remove(source)
        except OSError:
            pass
    traces.append(TorchTraceFile(path=path, pid=int(meta.get("pid") or 0), rank=meta.get("rank"),
                                 clock_offset_ns=entry.get("clock_offset_ns"),
                                 clock_uncertainty_ns=entry.get("clock_uncertainty_ns"),
                                 clock_method=entry.get("clock_method"), source="program", cycle=k,
                                 role=meta.get("role")))
