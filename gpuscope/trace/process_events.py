"""One process's event log as read (docs/EVENTS.md): its identity, names, marks, exit, and its
ranges, decoded lazily.

``ProcessEvents.ranges`` is a numpy record array, made on first use (from the ``.ranges`` file's
bytes, as they are). What the end of a ``gpuscope run`` needs (counts, names, the top ranges, the
last end, the task ranges of the pool rules) the ``range_*`` methods compute without numpy for a
log of at most ``SMALL_LOG_RANGES`` ranges: importing numpy would cost a short run more than its
whole summary (docs/EVENTS.md). Both paths give the same answers
(``tests/runs/test_event_logs_small.py`` runs each on the same logs). The reader that fills these
is :mod:`gpuscope.trace.events`.
"""

from __future__ import annotations

import os
import sys
from array import array
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuscope.inject.eventlog import RANGES_MAGIC

if TYPE_CHECKING:
    from typing import Iterable

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


class Name(NamedTuple):
    """One name a log declared: its id, kind, NVTX domain, text and colour."""

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
