"""Read gpuscope's per-process event logs (docs/EVENTS.md) from a run folder.

Ranges are read lazily. ``ProcessEvents.ranges`` is a numpy record array, made on first use (from
the ``.ranges`` file's bytes, as they are). What the end of a ``gpuscope run`` needs (counts, names,
the top ranges, the last end, the task ranges of the pool rules) the ``range_*`` methods compute
without numpy for a log of at most ``SMALL_LOG_RANGES`` ranges: importing numpy would cost a
short run more than its whole summary (docs/EVENTS.md). Both paths give the same answers
(``tests/runs/test_event_logs_small.py`` runs each on the same logs).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from operator import itemgetter
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuscope.inject.eventlog import (
    CHILD, ERROR, EXIT, HEADER, INFO, JOB, MARK, NAME, RANGE, RANGES_MAGIC, RANGES_SUFFIX, REIMPORT, SHM, TASK,
)
from gpuscope.rundir import event_logs

if TYPE_CHECKING:
    from typing import Callable, Iterable

    import numpy as np

# A log with at most this many ranges is summarised in pure Python; above it, numpy (a 10 k-range
# log decodes and sorts quickly in Python; numpy's import costs more: docs/EVENTS.md).
SMALL_LOG_RANGES = 10_000
_COLUMNS = (("t0", "<i8", 8), ("t1", "<i8", 8), ("tid", "<i4", 4), ("nid", "<i4", 4), ("style", "S1", 1))
_BIG_ENDIAN = sys.byteorder == "big"

# (t0, t1, tid, nid, style) of one range, style as numpy's "S1" gives it back (b"" for a NUL)
RangeRow = tuple[int, int, int, int, bytes]


def __getattr__(name: str) -> Any:
    """``RANGE_DTYPE`` imports numpy only when someone asks for it."""
    if name == "RANGE_DTYPE":
        return _dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dtype() -> Any:
    import numpy as np

    return np.dtype([("t0", "i8"), ("t1", "i8"), ("tid", "i4"), ("nid", "i4"), ("style", "S1")])


def _blocks(data: bytes) -> tuple[list[tuple[int, int]], bool]:
    """(offset of the columns, count) of each whole block of a ``.ranges`` file; True if the last was cut."""
    blocks: list[tuple[int, int]] = []
    pos, size = 0, len(data)
    while pos < size:
        if size - pos < 8 or data[pos:pos + 4] != RANGES_MAGIC:
            return blocks, True
        count = int.from_bytes(data[pos + 4:pos + 8], "little")
        end = pos + 8 + 25 * count
        if end > size:
            return blocks, True
        blocks.append((pos + 8, count))
        pos = end
    return blocks, False


def _array_of(data: bytes, blocks: list[tuple[int, int]]) -> "np.ndarray":
    import numpy as np

    dtype = _dtype()
    parts = []
    for off, count in blocks:
        block = np.empty(count, dtype)
        for name, kind, width in _COLUMNS:
            block[name] = np.frombuffer(data, kind, count, off)
            off += width * count
        parts.append(block)
    if not parts:
        return np.zeros(0, dtype)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _column(data: bytes, code: str, off: int, count: int, width: int) -> array:
    col = array(code)
    col.frombytes(data[off:off + width * count])
    if _BIG_ENDIAN:
        col.byteswap()
    return col


def _rows_of(data: bytes, blocks: list[tuple[int, int]]) -> list[RangeRow]:
    """The same ranges as :func:`_array_of`, as tuples, without numpy."""
    rows: list[RangeRow] = []
    for off, count in blocks:
        t0 = _column(data, "q", off, count, 8)
        t1 = _column(data, "q", off + 8 * count, count, 8)
        tid = _column(data, "i", off + 16 * count, count, 4)
        nid = _column(data, "i", off + 20 * count, count, 4)
        s = off + 24 * count
        style = [bytes((c,)) if c else b"" for c in data[s:s + count]]
        rows.extend(zip(t0, t1, tid, nid, style))
    return rows


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def read_ranges(path: str | os.PathLike[str]) -> "tuple[np.ndarray, bool]":
    """The blocks of a ``.ranges`` file as one record array; True if the last block was cut."""
    try:
        data = _read_bytes(path)
    except OSError:
        data = b""
    blocks, truncated = _blocks(data)
    return _array_of(data, blocks), truncated


def _style(text: str) -> bytes:
    """What numpy's "S1" keeps of a text style: its first byte (none for a NUL)."""
    return text.encode()[:1].rstrip(b"\0")


_T0 = itemgetter(0)


@dataclass(frozen=True)
class Name:
    id: int
    kind: str       # nvtx | task | func
    domain: str
    name: str
    color: str      # "#rrggbb" or ""


@dataclass
class ProcessEvents:
    """One process's log: identity, names, ranges (``ranges``: a numpy record array, made on first
    use; ``range_*``: the same without numpy for a small log), marks, end."""

    path: str       # the .log file
    header: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    names: dict[int, Name] = field(default_factory=dict)
    marks: list[tuple[int, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    exit: dict[str, Any] | None = None
    end_ns: int | None = None
    truncated: bool = False
    info_times: list[tuple[int, dict[str, Any]]] = field(default_factory=list)   # (t, I line), in order
    # C lines: (t_call, t_return, pid, role its target gives it: "" in logs older than that field)
    children: list[tuple[int, int, int, str]] = field(default_factory=list)
    jobs: list[tuple[int, int, int]] = field(default_factory=list)      # J lines: (t, tid, job) pool jobs submitted
    tasks: list[tuple[int, int, int, int]] = field(default_factory=list)  # T lines: (t, tid, job, i) pool tasks taken
    # U line: (t0, t1, {"how", "main", "imports", "modules": [[name, ns], ...], "other_ns"}) __main__ re-imported
    main_reimport: tuple[int, int, dict[str, Any]] | None = None
    # D lines: (t, {"op": "create" | "unlink", "kind": "shm" | "sem", "name", "size", "where"})
    shm: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # the log the same process wrote before it exec'd this interpreter (a fork child that execs)
    pre_exec: "ProcessEvents | None" = None
    # the ranges, in one of three forms (the first set wins): a numpy array, tuples in start order,
    # or the raw parts as read (text rows, the .ranges bytes and its blocks)
    _array: Any = field(default=None, repr=False, compare=False)
    _rows: list[RangeRow] | None = field(default=None, repr=False, compare=False)
    _raw: tuple[list[RangeRow], bytes, list[tuple[int, int]]] | None = field(default=None, repr=False,
                                                                               compare=False)

    # -- ranges -------------------------------------------------------------------------------------
    @property
    def ranges(self) -> "np.ndarray":
        """Every closed range, in start order: a numpy record array (``RANGE_DTYPE``)."""
        if self._array is None:
            import numpy as np

            dtype = _dtype()
            if self._rows is not None:
                self._array = np.array(self._rows, dtype=dtype) if self._rows else np.zeros(0, dtype)
            elif self._raw is not None:
                text, data, blocks = self._raw
                parts = [a for a in (np.array(text, dtype=dtype) if text else None, _array_of(data, blocks))
                         if a is not None and len(a)]
                if parts:
                    both = np.concatenate(parts) if len(parts) > 1 else parts[0]
                    self._array = both[np.argsort(both["t0"], kind="stable")]
                else:
                    self._array = np.zeros(0, dtype)
            else:
                self._array = np.zeros(0, dtype)
            self._rows = self._raw = None
        return self._array

    @ranges.setter
    def ranges(self, value: "np.ndarray") -> None:
        self._array, self._rows, self._raw = value, None, None

    @property
    def range_count(self) -> int:
        """How many ranges (no numpy needed)."""
        if self._array is not None:
            return len(self._array)
        if self._rows is not None:
            return len(self._rows)
        if self._raw is not None:
            return len(self._raw[0]) + sum(count for _, count in self._raw[2])
        return 0

    def _small(self) -> bool:
        """Summarise in pure Python: the ranges are not a numpy array yet and they are few."""
        return self._array is None and self.range_count <= SMALL_LOG_RANGES

    def range_rows(self) -> list[RangeRow]:
        """The ranges as ``(t0, t1, tid, nid, style)`` tuples in start order (a copy's worth of work
        for a big log: the summaries below use numpy there)."""
        if self._array is not None:
            return [tuple(r) for r in self._array.tolist()]
        if self._rows is None:
            rows: list[RangeRow] = []
            if self._raw is not None:
                text, data, blocks = self._raw
                rows = sorted([*text, *_rows_of(data, blocks)], key=_T0)
            self._rows, self._raw = rows, None
        return self._rows

    def range_end(self) -> int | None:
        """The last end of a range (None without ranges)."""
        if not self.range_count:
            return None
        if self._small():
            return max(r[1] for r in self.range_rows())
        return int(self.ranges["t1"].max())

    def range_totals(self) -> dict[int, tuple[int, int]]:
        """Per name id, in id order: (count, total ns) of its ranges."""
        if not self.range_count:
            return {}
        if self._small():
            totals: dict[int, list[int]] = {}
            for t0, t1, _tid, nid, _style in self.range_rows():
                entry = totals.get(nid)
                if entry is None:
                    totals[nid] = [1, t1 - t0]
                else:
                    entry[0] += 1
                    entry[1] += t1 - t0
            return {nid: (c, t) for nid, (c, t) in sorted(totals.items())}
        import numpy as np

        r = self.ranges
        out = {}
        for nid in np.unique(r["nid"]):
            sel = r[r["nid"] == nid]
            out[int(nid)] = (len(sel), int((sel["t1"] - sel["t0"]).sum()))
        return out

    def range_times(self, nids: Iterable[int] | None = None) -> tuple[Any, Any]:
        """(t0s, t1s) in start order of the ranges whose name id is in ``nids`` (all: None): int
        lists for a small log, contiguous int64 arrays for a big one."""
        if self._small():
            wanted = None if nids is None else set(nids)
            rows = self.range_rows() if wanted is None else [r for r in self.range_rows() if r[3] in wanted]
            return [r[0] for r in rows], [r[1] for r in rows]
        import numpy as np

        r = self.ranges
        if nids is not None:
            r = r[np.isin(r["nid"], list(nids))]
        return np.ascontiguousarray(r["t0"]), np.ascontiguousarray(r["t1"])

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
        cpu = x.get("cpu_s")   # exact; logs before it had only the two parts (getrusage's)
        if cpu is None and x.get("cpu_user_s") is not None and x.get("cpu_system_s") is not None:
            cpu = x["cpu_user_s"] + x["cpu_system_s"]
        cpu = None if cpu is None else float(cpu)
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
        return sorted({self.label(nid) for nid in self.range_totals()})

    def label(self, nid: int) -> str:
        name = self.names.get(nid)
        if name is None:
            return f"<name {nid}>"
        return f"{name.domain}:{name.name}" if name.domain else name.name

    def top_ranges(self, n: int = 3) -> list[tuple[str, int, int]]:
        """(name, count, total_ns) of the ranges with the most total time."""
        totals: dict[str, list[int]] = {}
        for nid, (count, total) in self.range_totals().items():
            entry = totals.setdefault(self.label(nid), [0, 0])
            entry[0] += count
            entry[1] += total
        ordered = sorted(totals.items(), key=lambda kv: -kv[1][1])
        return [(k, v[0], v[1]) for k, v in ordered[:n]]


class _LogState:
    """One process's log as read so far: where each of its two files was read to, and what its
    whole lines said (a line still being written waits for its newline)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.ranges_path = os.path.splitext(path)[0] + RANGES_SUFFIX
        self.offset = 0                 # bytes of the .log read
        self.tail = b""                 # the partial last line of what was read
        self.header: dict[str, Any] | None = None
        self.not_a_log = False          # its first line is no header: not a gpuscope log
        self.info: dict[str, Any] = {}
        self.info_times: list[tuple[int, dict[str, Any]]] = []
        self.names: dict[int, Name] = {}
        self.marks: list[tuple[int, int, int]] = []
        self.errors: list[str] = []
        self.exit: dict[str, Any] | None = None
        self.end_ns: int | None = None
        self.children: list[tuple[int, int, int, str]] = []
        self.jobs: list[tuple[int, int, int]] = []
        self.tasks: list[tuple[int, int, int, int]] = []
        self.main_reimport: tuple[int, int, dict[str, Any]] | None = None
        self.shm: list[tuple[int, dict[str, Any]]] = []
        self.rows: list[RangeRow] = []  # R lines (ranges in text form)
        self.damaged = False
        self.ranges_offset = 0          # bytes of the .ranges file read
        self.ranges_data = bytearray()  # its whole blocks
        self.ranges_pending = b""       # the start of a block not yet whole
        self.blocks: list[tuple[int, int]] = []
        self.ranges_cut = False

    @property
    def pid(self) -> int:
        return int((self.header or {}).get("pid", 0))

    def read(self, ranges: bool = True) -> list[tuple[str, int, Any]]:
        """Read what the files gained; returns the new identity records (kind, t, value): the
        header ("H"), info updates ("I"), children ("C") and the exit record ("X")."""
        new: list[tuple[str, int, Any]] = []
        data = b"" if self.not_a_log else _read_from(self.path, self.offset)
        if data:
            self.offset += len(data)
            data = self.tail + data
            end = data.rfind(b"\n") + 1
            self.tail = data[end:]
            for line in data[:end].split(b"\n")[:-1]:
                self._line(line.decode("utf-8", "replace"), new)
                if self.not_a_log:
                    break
        if ranges and self.header is not None:
            self._read_ranges()
        return new

    def _read_ranges(self) -> None:
        """The whole blocks the .ranges file gained; a block still being written waits."""
        data = _read_from(self.ranges_path, self.ranges_offset)
        if not data:
            return
        self.ranges_offset += len(data)
        pending = self.ranges_pending + data
        blocks, self.ranges_cut = _blocks(pending)
        whole = blocks[-1][0] + 25 * blocks[-1][1] if blocks else 0
        base = len(self.ranges_data)
        self.ranges_data += pending[:whole]
        self.blocks.extend((base + off, count) for off, count in blocks)
        self.ranges_pending = pending[whole:]

    def _line(self, line: str, new: list[tuple[str, int, Any]]) -> None:
        if self.header is None:
            if not line.startswith(HEADER + "\t"):
                self.not_a_log = True
                return
            try:
                header = json.loads(line[2:])
            except ValueError:
                header = None
            if not _is_header(header):   # a damaged header names no process: not a log to read
                self.not_a_log = True
                return
            self.header, self.info = header, dict(header)
            new.append((HEADER, int(header.get("anchor_mono_ns", 0)), header))
            return
        tag = line[:1]
        parts = line.split("\t")
        try:
            if tag == RANGE:
                self.rows.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), _style(parts[5])))
            elif tag == NAME:
                nid = int(parts[1])
                self.names[nid] = Name(nid, parts[2], parts[3], parts[4], parts[5] if len(parts) > 5 else "")
            elif tag == MARK:
                self.marks.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == INFO:
                update = json.loads(parts[2])
                self.info.update(update)
                self.info_times.append((int(parts[1]), update))
                new.append((INFO, int(parts[1]), update))
            elif tag == CHILD:
                child = (int(parts[1]), int(parts[2]), int(parts[3]), parts[4] if len(parts) > 4 else "")
                self.children.append(child)
                new.append((CHILD, child[0], child))
            elif tag == JOB:
                self.jobs.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == TASK:
                self.tasks.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
            elif tag == REIMPORT:
                self.main_reimport = (int(parts[1]), int(parts[2]), json.loads(parts[3]))
            elif tag == SHM:
                self.shm.append((int(parts[1]), json.loads(parts[2])))
            elif tag == EXIT:
                self.end_ns = int(parts[1])
                self.exit = json.loads(parts[2])
                new.append((EXIT, self.end_ns, self.exit))
            elif tag == ERROR:
                self.errors.append(parts[2] if len(parts) > 2 else line)
        except (IndexError, ValueError):
            self.damaged = True  # a damaged line: keep what came before and after

    def events(self) -> ProcessEvents | None:
        """What was read, as a :class:`ProcessEvents` of its own (the state reads on): None
        without a header. A line or range block not yet whole counts as cut (``truncated``)."""
        if self.header is None:
            return None
        pe = ProcessEvents(path=self.path, header=self.header, info=dict(self.info), names=dict(self.names),
                           marks=list(self.marks), errors=list(self.errors), exit=self.exit, end_ns=self.end_ns,
                           truncated=self.damaged or bool(self.tail) or self.ranges_cut,
                           info_times=list(self.info_times), children=list(self.children), jobs=list(self.jobs),
                           tasks=list(self.tasks), main_reimport=self.main_reimport, shm=list(self.shm))
        pe._raw = (list(self.rows), bytes(self.ranges_data), list(self.blocks))
        return pe


def _is_header(value: Any) -> bool:
    """An H line's object names its process: pid and the two clock anchors, integers."""
    return isinstance(value, dict) and all(isinstance(value.get(k), int) and not isinstance(value.get(k), bool)
                                           for k in HEADER_KEYS)


HEADER_KEYS = ("pid", "anchor_mono_ns", "anchor_wall_ns")


def _read_from(path: str, offset: int) -> bytes:
    """The bytes of ``path`` from ``offset`` on (b"" when it is missing or has no more)."""
    try:
        with open(path, "rb") as fh:
            if offset:
                fh.seek(offset)
            return fh.read()
    except OSError:
        return b""


# (kind, t, value) of one identity record of a run: the header, an info update, a child started,
# the exit record, with the pid of the process that wrote it
Record = tuple[int, str, int, Any]


class RunEvents:
    """A run's event logs, read incrementally: :meth:`refresh` reads only what each file gained
    since the last call (an offset per file; a line or a range block still being written waits).
    One per run, shared by what reads the logs while it runs and at its end (roles, findings,
    Ray, stacks, the process rows); thread-safe.

    :meth:`processes` gives every process's :class:`ProcessEvents` as read so far (one per
    process: an exec'd interpreter's log merged with the one before; roles from parents);
    :meth:`records_since` the identity records (H, I, C, X lines) in the order read, from a cursor,
    so that several readers each go on from where they were; ``on_first_exit`` callbacks run once
    the run's first process (main, or torchrun's agent) has written its exit record."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_folder = os.fspath(run_dir)
        self._logs: dict[str, _LogState] = {}
        self._records: list[Record] = []
        self._lock = threading.Lock()
        self._first_exit_seen = False
        self._on_first_exit: list[Callable[[], None]] = []

    def refresh(self, ranges: bool = True) -> bool:
        """Read what the logs gained (``ranges``: the range files too: the end of a run, not every
        poll of it); True if anything was new."""
        with self._lock:
            grew = False
            for path in event_logs(self.run_folder):
                state = self._logs.get(path)
                if state is None:
                    state = self._logs[path] = _LogState(path)
                before = state.offset + state.ranges_offset
                new = state.read(ranges)
                grew = grew or before != state.offset + state.ranges_offset
                pid = state.pid
                self._records.extend((pid, kind, t, value) for kind, t, value in new)
            fire = self._first_exit_now()
        for callback in fire:
            _call_quietly(callback)
        return grew

    def _first_exit_now(self) -> list[Callable[[], None]]:
        if self._first_exit_seen or not self._first_exited():
            return []
        self._first_exit_seen = True
        return list(self._on_first_exit)

    def _first_exited(self) -> bool:
        state = self._first_state()
        return state is not None and state.exit is not None

    def _first_state(self) -> _LogState | None:
        for role in FIRST_ROLES:
            for state in self._logs.values():
                if state.header is not None and state.header.get("role") == role:
                    return state
        return None

    def on_first_exit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once, on the thread that reads it) when the run's first process has
        written its exit record: its program has ended, though a recorder (nsys) may still write."""
        with self._lock:
            if not self._first_exit_seen:
                self._on_first_exit.append(callback)
                return
        _call_quietly(callback)

    @property
    def first_exited(self) -> bool:
        """Whether the run's first process has written its exit record (as last read)."""
        with self._lock:
            return self._first_exited()

    def processes(self) -> list[ProcessEvents]:
        """Every process's log as read so far, ordered by start time (one per process)."""
        with self._lock:
            logs = [pe for state in self._logs.values() if (pe := state.events()) is not None]
        logs.sort(key=lambda p: (p.start_ns, p.pid))
        return roles_from_parents(merge_execs(logs))

    def records_since(self, cursor: int = 0) -> tuple[int, list[Record]]:
        """(the next cursor, the identity records read since ``cursor``): (pid, kind, t, value)
        with kind "H" (value: the header), "I" (the update), "C" ((t_call, t_return, pid, role))
        or "X" (the exit record)."""
        with self._lock:
            return len(self._records), self._records[cursor:]

    def headers(self) -> dict[int, dict[str, Any]]:
        """Per pid, its identity as last read (the header updated by its info lines)."""
        with self._lock:
            return {state.pid: dict(state.info) for state in self._logs.values() if state.header is not None}

    @property
    def bytes_read(self) -> int:
        """How much of the logs has been read (grows with the program's events)."""
        with self._lock:
            return sum(s.offset + s.ranges_offset for s in self._logs.values())


def _call_quietly(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # noqa: BLE001 - a listener's bug must not stop the reading
        pass


# The run's first process: what ``gpuscope run`` started (python), or torchrun's agent.
FIRST_ROLES = ("main", "torchrun agent")


def read_log(path: str | os.PathLike[str]) -> ProcessEvents | None:
    """Parse one log; None when it has no header (not a gpuscope log)."""
    state = _LogState(os.fspath(path))
    state.read()
    return state.events()


def read_run_events(run_dir: str | os.PathLike[str]) -> list[ProcessEvents]:
    """Every process log of a run, ordered by start time (:meth:`RunEvents.processes` of a
    reader that reads the folder once)."""
    events = RunEvents(run_dir)
    events.refresh()
    return events.processes()


# What a multiprocessing child is until it reads its Process object (hook.detect_role).
START_ROLES = ("spawn child", "fork child")


def roles_from_parents(logs: list[ProcessEvents]) -> list[ProcessEvents]:
    """A child that never learnt its role (a pool worker that ``Pool.terminate()`` ended while it
    started, before it read its Process object) gets the one the C line of the process that
    started it gives (that process is not its parent for a forkserver child: matched by pid, the
    last ``start()`` call before the child's own start)."""
    told: dict[int, list[tuple[int, str]]] = {}
    for pe in logs:
        for t_call, _, pid, role in pe.children:
            if role:
                told.setdefault(pid, []).append((t_call, role))
    for pe in logs:
        if pe.role in START_ROLES and pe.pid in told:
            before = [(t, role) for t, role in told[pe.pid] if t <= pe.start_ns]
            if before:
                pe.info["role"] = max(before)[1]
    return logs


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
    if not prev.range_count and not prev.marks:
        return
    shift = max(pe.names, default=0) + 1   # the earlier log's name ids, moved past the later one's
    for nid, name in prev.names.items():
        pe.names[nid + shift] = Name(nid + shift, name.kind, name.domain, name.name, name.color)
    if prev.range_count and prev._small() and pe._small():
        moved = [(t0, t1, tid, nid + shift, style) for t0, t1, tid, nid, style in prev.range_rows()]
        pe._rows, pe._raw = sorted(moved + pe.range_rows(), key=_T0), None
    elif prev.range_count:
        import numpy as np

        moved = prev.ranges.copy()
        moved["nid"] += shift
        both = np.concatenate([moved, pe.ranges]) if len(pe.ranges) else moved
        pe.ranges = both[np.argsort(both["t0"], kind="stable")]
    pe.marks = sorted([(t, tid, nid + shift) for t, tid, nid in prev.marks] + pe.marks)


def main_exited(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run's first process has written its exit record, read from the folder once (a
    caller that asks again and again holds a :class:`RunEvents` and its ``on_first_exit``)."""
    events = RunEvents(run_dir)
    events.refresh(ranges=False)
    return events.first_exited


def log_has_exit(path: str | os.PathLike[str]) -> bool:
    """Whether a process's log ends with its exit record (X line)."""
    pe = read_log(path)
    return pe is not None and pe.exit is not None
