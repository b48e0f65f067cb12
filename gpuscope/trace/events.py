"""Read gpuscope's per-process event logs (docs/EVENTS.md) from a run folder."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

RANGE_DTYPE = np.dtype([("t0", "i8"), ("t1", "i8"), ("tid", "i4"), ("nid", "i4"), ("style", "S1")])
RANGES_MAGIC = b"GSR1"


def read_ranges(path: Path) -> tuple[np.ndarray, bool]:
    """The blocks of a ``.ranges`` file as one record array; True if the last block was cut."""
    try:
        data = path.read_bytes()
    except OSError:
        return np.zeros(0, RANGE_DTYPE), False
    blocks = []
    pos, size = 0, len(data)
    truncated = False
    while pos < size:
        if size - pos < 8 or data[pos:pos + 4] != RANGES_MAGIC:
            truncated = True
            break
        count = int(np.frombuffer(data, "<u4", 1, pos + 4)[0])
        end = pos + 8 + 25 * count
        if end > size:
            truncated = True
            break
        block = np.empty(count, RANGE_DTYPE)
        off = pos + 8
        for name, dtype, width in (("t0", "<i8", 8), ("t1", "<i8", 8), ("tid", "<i4", 4), ("nid", "<i4", 4),
                                   ("style", "S1", 1)):
            block[name] = np.frombuffer(data, dtype, count, off)
            off += width * count
        blocks.append(block)
        pos = end
    if not blocks:
        return np.zeros(0, RANGE_DTYPE), truncated
    return (np.concatenate(blocks) if len(blocks) > 1 else blocks[0]), truncated


@dataclass(frozen=True)
class Name:
    id: int
    kind: str       # nvtx | task | func
    domain: str
    name: str
    color: str      # "#rrggbb" or ""


@dataclass
class ProcessEvents:
    """One process's log: identity, names, ranges (a numpy record array), marks, end."""

    path: Path
    header: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    names: dict[int, Name] = field(default_factory=dict)
    ranges: np.ndarray = field(default_factory=lambda: np.zeros(0, RANGE_DTYPE))
    marks: list[tuple[int, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    exit: dict[str, Any] | None = None
    end_ns: int | None = None
    truncated: bool = False
    info_times: list[tuple[int, dict[str, Any]]] = field(default_factory=list)   # (t, I line), in order
    children: list[tuple[int, int, int]] = field(default_factory=list)  # C lines: (t_call, t_return, pid)
    jobs: list[tuple[int, int, int]] = field(default_factory=list)      # J lines: (t, tid, job) pool jobs submitted
    tasks: list[tuple[int, int, int, int]] = field(default_factory=list)  # T lines: (t, tid, job, i) pool tasks taken
    # the log the same process wrote before it exec'd this interpreter (a fork child that execs)
    pre_exec: "ProcessEvents | None" = None

    @property
    def pid(self) -> int:
        return int(self.header["pid"])

    @property
    def ppid(self) -> int | None:
        return self.header.get("ppid")

    @property
    def role(self) -> str:
        return str(self.info.get("role") or self.header.get("role") or "unknown")

    @property
    def start_method(self) -> str | None:
        return self.info.get("start_method") or self.header.get("start_method")

    @property
    def rank(self) -> int | None:
        value = self.info.get("rank", self.header.get("rank"))
        return int(value) if value is not None else None

    @property
    def start_ns(self) -> int:
        return int(self.header["anchor_mono_ns"])

    @property
    def first_start_ns(self) -> int:
        """When the process began: before an ``exec``, when it has a log from before one."""
        return self.pre_exec.first_start_ns if self.pre_exec is not None else self.start_ns

    def wall_ns(self, mono_ns: int) -> int:
        """Wall-clock time (epoch ns) of a monotonic timestamp of this process."""
        return int(self.header["anchor_wall_ns"]) + (mono_ns - int(self.header["anchor_mono_ns"]))

    @property
    def exit_code(self) -> int | None:
        return (self.exit or {}).get("exit_code")

    def exact_usage(self) -> tuple[float | None, int | None]:
        """(CPU seconds, peak RSS bytes) the process measured at exit (its X line), or None each."""
        x = self.exit or {}
        user, system = x.get("cpu_user_s"), x.get("cpu_system_s")
        cpu = float(user) + float(system) if user is not None and system is not None else None
        kib = x.get("hwm_kib")   # VmHWM: its own address space (ru_maxrss carries a pre-exec peak)
        return cpu, int(kib) * 1024 if kib else None

    # Findings' counters (I lines written by gpuscope/inject/{pickwatch,cudawatch,samplerwatch}.py,
    # cumulative: the last line holds the totals; docs/EVENTS.md).
    @property
    def pickled(self) -> dict[str, float] | None:
        """``{"bytes", "calls", "max_bytes", "seconds"}`` multiprocessing pickled to send, or None."""
        value = self.info.get("pickled")
        return value if isinstance(value, dict) else None

    @property
    def cuda_at_fork(self) -> dict[str, Any] | None:
        """``{"t_wall_ns", "init_site", "forks"}``: it forked after CUDA was initialised in it, or None."""
        value = self.info.get("cuda_at_fork")
        return value if isinstance(value, dict) else None

    @property
    def sampler_epochs(self) -> dict[str, Any] | None:
        """``{"iters", "shuffled_iters", "repeats", "epochs", "site"}`` of DistributedSampler iterations."""
        value = self.info.get("sampler_epochs")
        return value if isinstance(value, dict) else None

    def range_names(self) -> list[str]:
        ids = np.unique(self.ranges["nid"]) if len(self.ranges) else []
        return sorted({self.label(int(i)) for i in ids})

    def label(self, nid: int) -> str:
        name = self.names.get(nid)
        if name is None:
            return f"<name {nid}>"
        return f"{name.domain}:{name.name}" if name.domain else name.name

    def top_ranges(self, n: int = 3) -> list[tuple[str, int, int]]:
        """(name, count, total_ns) of the ranges with the most total time."""
        totals: dict[str, list[int]] = {}
        for nid in np.unique(self.ranges["nid"]) if len(self.ranges) else []:
            sel = self.ranges[self.ranges["nid"] == nid]
            entry = totals.setdefault(self.label(int(nid)), [0, 0])
            entry[0] += len(sel)
            entry[1] += int((sel["t1"] - sel["t0"]).sum())
        ordered = sorted(totals.items(), key=lambda kv: -kv[1][1])
        return [(k, v[0], v[1]) for k, v in ordered[:n]]


def read_log(path: str | os.PathLike[str]) -> ProcessEvents | None:
    """Parse one log; None when it has no header (not a gpuscope log)."""
    path = Path(path)
    data = path.read_bytes()
    truncated = bool(data) and not data.endswith(b"\n")
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if truncated or (lines and lines[-1] == ""):
        lines.pop()  # the partial last line of a killed process, or the empty tail
    if not lines or not lines[0].startswith("H\t"):
        return None
    try:
        header = json.loads(lines[0][2:])
    except ValueError:
        return None
    pe = ProcessEvents(path=path, header=header, info=dict(header), truncated=truncated)
    rows: list[tuple[int, int, int, int, bytes]] = []
    last = int(header.get("anchor_mono_ns", 0))
    for line in lines[1:]:
        tag = line[:1]
        parts = line.split("\t")
        try:
            if tag == "R":
                rows.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), parts[5].encode()))
            elif tag == "S":
                nid = int(parts[1])
                pe.names[nid] = Name(nid, parts[2], parts[3], parts[4], parts[5] if len(parts) > 5 else "")
            elif tag == "M":
                pe.marks.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == "I":
                last = max(last, int(parts[1]))
                update = json.loads(parts[2])
                pe.info.update(update)
                pe.info_times.append((int(parts[1]), update))
            elif tag == "C":
                pe.children.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == "J":
                pe.jobs.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == "T":
                pe.tasks.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
            elif tag == "X":
                pe.end_ns = int(parts[1])
                pe.exit = json.loads(parts[2])
            elif tag == "E":
                pe.errors.append(parts[2] if len(parts) > 2 else line)
        except (IndexError, ValueError):
            pe.truncated = True  # a damaged line: keep what came before and after
    binary, cut = read_ranges(path.with_suffix(".ranges"))
    pe.truncated = pe.truncated or cut
    parts_ = [a for a in (np.array(rows, dtype=RANGE_DTYPE) if rows else None, binary) if a is not None and len(a)]
    if parts_:
        pe.ranges = np.concatenate(parts_) if len(parts_) > 1 else parts_[0]
        pe.ranges = pe.ranges[np.argsort(pe.ranges["t0"], kind="stable")]
    return pe


def read_run_events(run_dir: str | os.PathLike[str]) -> list[ProcessEvents]:
    """Every process log of a run, ordered by start time."""
    folder = Path(run_dir) / "events"
    if not folder.is_dir():
        return []
    logs = []
    for entry in sorted(folder.glob("*.log")):
        pe = read_log(entry)
        if pe is not None:
            logs.append(pe)
    logs.sort(key=lambda p: (p.start_ns, p.pid))
    return merge_execs(logs)


def merge_execs(logs: list[ProcessEvents]) -> list[ProcessEvents]:
    """One entry per process: a process that ``exec``s a new Python interpreter writes a second log
    under the same pid (a fork child of ``subprocess.Popen(preexec_fn=...)``, which runs Python's
    fork handlers before the exec, or ``os.execv``). The earlier log (no exit record, same parent)
    becomes the later one's ``pre_exec``; its ranges and marks join the later one's.
    ``logs`` are in start order."""
    latest: dict[int, ProcessEvents] = {}
    out: list[ProcessEvents] = []
    for pe in logs:
        prev = latest.get(pe.pid)
        if (prev is not None and prev.exit is None and not pe.header.get("forked")
                and prev.ppid == pe.ppid and prev.start_ns <= pe.start_ns):
            _absorb(pe, prev)
            out.remove(prev)
        latest[pe.pid] = pe
        out.append(pe)
    return out


def _absorb(pe: ProcessEvents, prev: ProcessEvents) -> None:
    pe.pre_exec = prev
    pe.truncated = pe.truncated or prev.truncated
    pe.errors = prev.errors + pe.errors
    if not len(prev.ranges) and not prev.marks:
        return
    shift = max(pe.names, default=0) + 1   # the earlier log's name ids, moved past the later one's
    for nid, name in prev.names.items():
        pe.names[nid + shift] = Name(nid + shift, name.kind, name.domain, name.name, name.color)
    if len(prev.ranges):
        moved = prev.ranges.copy()
        moved["nid"] += shift
        both = np.concatenate([moved, pe.ranges]) if len(pe.ranges) else moved
        pe.ranges = both[np.argsort(both["t0"], kind="stable")]
    pe.marks = sorted([(t, tid, nid + shift) for t, tid, nid in prev.marks] + pe.marks)


def first_process_log(run_dir: str | os.PathLike[str]) -> Path | None:
    """The log of the run's first process (``main``, else ``torchrun agent``), once it exists."""
    try:
        logs = list((Path(run_dir) / "events").glob("*.log"))
    except OSError:
        return None
    for role in ("main", "torchrun agent"):
        for path in logs:
            try:
                with open(path, "rb") as fh:
                    if f'"role": "{role}"'.encode() in fh.readline():
                        return path
            except OSError:
                continue
    return None


def main_exited(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run's main process has written its exit record (its program has ended, though
    a recorder such as nsys may still be writing). Reads each log's first line and the main log's
    tail only."""
    for path in sorted(Path(run_dir, "events").glob("*.log")):
        try:
            with open(path, "rb") as fh:
                first = fh.readline()
            header = json.loads(first.split(b"\t", 1)[1]) if first.startswith(b"H\t") else {}
        except (OSError, ValueError, IndexError):
            continue
        if header.get("role") == "main":
            return log_has_exit(path)
    return False


def log_has_exit(path: Path) -> bool:
    """Whether a process's log ends with its exit record (X line); reads only the tail."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            return b"\nX\t" in fh.read()
    except OSError:
        return False
