"""Read one Kineto Chrome trace (the PyTorch profiler's ``export_chrome_trace``, plain or .gz)
as columns, streaming: ``json``'s C decoder one event at a time over a bounded text buffer (``ijson``
for unusual input), never a whole ``json.load``.

Times: Kineto writes ``ts``/``dur`` in microseconds (three decimals, so nanoseconds) after the
trace's ``baseTimeNanoseconds`` (Unix time); older traces have absolute Unix microseconds and no
base. ``ts_ns`` is ``base + ts * 1000 + clock_offset_ns``: with the offset that gpuscope measured
at profile start it is gpuscope's ``CLOCK_MONOTONIC`` nanoseconds (docs/TORCH-PROFILER.md).
"""

from __future__ import annotations

import codecs
import functools
import gzip
import json
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import ijson
import numpy as np

from gpuscope.errors import UserError

# trace-level keys kept as metadata (the rest, e.g. deviceProperties, too)
HEAD_LIMIT = 8 << 20      # bytes of the file's start kept to read the metadata before traceEvents
TAIL_LIMIT = 1 << 16      # bytes of its end kept for the keys after traceEvents (traceName)
INT_COLUMNS = ("ts_ns", "dur_ns", "pid", "tid", "external_id", "correlation", "seq_num", "stream", "device",
               "mem_bytes", "mem_device_type")
CPU_MEMORY_DEVICES = {0, 2, 5}        # c10 DeviceType CPU, MKLDNN, IDEEP: torch's CPU memory
SEQ_KEYS = ("Seq", "seq", "seq_num")  # a collective's sequence number in newer record_param_comms args
GROUP_KEY = "Process Group Name"      # ... and its process group: a sequence number counts within one
CHUNK = 4096              # events parsed before their columns are filled (bounded memory)
KEPT_PH = ("X", "i", "I")
NUMBERS = (int, float)
OP_CATS = ("cpu_op", "user_annotation")   # the profiled process's own events: its pid
READ_SIZE = 1 << 20       # bytes read at a time by the json fast path
BUF_LIMIT = 64 << 20      # characters one event (or the metadata) may take before the fast path gives up
_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_KEY = re.compile(r'[ \t\n\r]*("(?:[^"\\]|\\.)*")[ \t\n\r]*:[ \t\n\r]*')


@dataclass
class TorchTrace:
    """One profiled process's events as numpy columns (one row per trace event kept)."""

    path: str
    pid: int
    rank: int | None
    meta: dict[str, Any]
    strings: list[str]                      # name, cat and shapes ids index this table
    cols: dict[str, np.ndarray]
    clock_offset_ns: int = 0
    clock_uncertainty_ns: int | None = None   # None: not measured (the trace's own clock)
    skipped: int = 0                        # events without the keys a reader needs
    thread_names: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["ts_ns"])

    @functools.cached_property
    def _ids(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.strings)}

    def string_id(self, text: str) -> int:
        """The id of ``text`` in the string table, -1 if the trace never uses it."""
        return self._ids.get(text, -1)

    def named(self, name: str) -> np.ndarray:
        """Indices of the events called ``name`` (a table row's events, to highlight)."""
        return np.flatnonzero(self.cols["name"] == self.string_id(name))

    def is_cat(self, *cats: str) -> np.ndarray:
        """Boolean mask: the events whose category is one of ``cats``."""
        ids = [self.string_id(c) for c in cats]
        return np.isin(self.cols["cat"], [i for i in ids if i >= 0])


class _Tap:
    """A file wrapper that keeps the head and the tail of what ijson reads (the trace's metadata)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.head, self.tail, self.read_bytes = raw, bytearray(), b"", 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.read_bytes += len(data)
        if len(self.head) < HEAD_LIMIT:
            self.head += data[:HEAD_LIMIT - len(self.head)]
        self.tail = (self.tail + data)[-TAIL_LIMIT:]
        return data


class _Columns:
    """Growing columns and the string table while the events stream by."""

    def __init__(self) -> None:
        self.ints = {k: array("q") for k in INT_COLUMNS}
        self.name, self.cat, self.shapes, self.ph = array("i"), array("i"), array("i"), array("B")
        self.group = array("i")     # a collective's process group name (string id), -1 elsewhere
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []
        self.skipped = 0
        self.thread_names: dict[int, str] = {}
        self.pids: dict[int, int] = {}

    def sid(self, text: str) -> int:
        got = self.ids.get(text)
        if got is None:
            got = self.ids[text] = len(self.strings)
            self.strings.append(text)
        return got

    def add_chunk(self, evs: list[Any], base_ns: int) -> None:
        """Add a chunk of events column by column (comprehensions: the hot path); a chunk with a
        value of an unexpected type goes event by event through :meth:`add`."""
        keep = [e for e in evs if type(e) is dict and e.get("ph") in KEPT_PH and type(e.get("pid")) is int
                and type(e.get("ts")) in NUMBERS]
        if len(keep) != len(evs):
            for e in evs:
                if type(e) is dict and not (e.get("ph") in KEPT_PH and type(e.get("pid")) is int
                                            and type(e.get("ts")) in NUMBERS):
                    self.add(e, base_ns)      # metadata, skipped and odd events: the careful path
        try:
            self._columns(keep, base_ns)
        except (TypeError, ValueError, OverflowError, KeyError):
            n = len(self.name)
            for arr in (*self.ints.values(), self.cat, self.shapes, self.ph, self.group):
                del arr[n:]
            for e in keep:
                self.add(e, base_ns)

    def _columns(self, evs: list[dict[str, Any]], base_ns: int) -> None:
        empty: dict[str, Any] = {}
        args = [e.get("args") or empty for e in evs]
        ints = self.ints
        n = len(self.name)
        try:
            ints["ts_ns"].extend([base_ns + round(e["ts"] * 1000) for e in evs])
            ints["dur_ns"].extend([round(e["dur"] * 1000) if "dur" in e else -1 for e in evs])
            ints["pid"].extend([e["pid"] for e in evs])
            ints["tid"].extend([t if type(t := e.get("tid")) is int else -1 for e in evs])
            ints["external_id"].extend([a.get("External id", -1) for a in args])
            ints["correlation"].extend([a.get("correlation", -1) for a in args])
            ints["seq_num"].extend([a.get("Seq", a.get("seq", a.get("seq_num", -1))) if a else -1 for a in args])
            ints["stream"].extend([a.get("stream", -1) for a in args])
            ints["device"].extend([a.get("device", a.get("Device Id", -1)) if a else -1 for a in args])
            ints["mem_bytes"].extend([a.get("Bytes", 0) for a in args])
            ints["mem_device_type"].extend([a.get("Device Type", -1) for a in args])
            ids, sid = self.ids, self.sid
            self.cat.extend([ids[c] if c in ids else sid(c) for c in [e.get("cat", "") for e in evs]])
            self.ph.extend([ord(e["ph"]) for e in evs])
            self.shapes.extend([-1 if d is None else sid(_shapes_fast(d))
                                for d in [a.get("Input Dims") for a in args]])
            self.group.extend([-1 if g is None else sid(str(g)) for g in [a.get(GROUP_KEY) for a in args]])
            self.name.extend([ids[c] if c in ids else sid(c) for c in [e.get("name", "") for e in evs]])
        except BaseException:
            for arr in (*ints.values(), self.cat, self.shapes, self.ph, self.group):
                del arr[n:]
            raise
        for pid, n_ops in Counter([e["pid"] for e in evs if e.get("cat") in OP_CATS]).items():
            self.pids[pid] = self.pids.get(pid, 0) + n_ops

    def add(self, ev: dict[str, Any], base_ns: int) -> None:
        ph, ts, pid = ev.get("ph"), ev.get("ts"), ev.get("pid")
        if ph == "M":
            if ev.get("name") == "thread_name" and isinstance(ev.get("tid"), int):
                self.thread_names[ev["tid"]] = str((ev.get("args") or {}).get("name", ""))
            return
        if ph not in ("X", "i", "I") or not isinstance(ts, (int, float)) or not isinstance(pid, int):
            self.skipped += ph is None or not isinstance(ts, (int, float))   # Kineto's own spans have text pids
            return
        args = ev.get("args") or {}
        tid = ev.get("tid")
        dur = ev.get("dur")
        ints = self.ints
        ints["ts_ns"].append(base_ns + round(ts * 1000))
        ints["dur_ns"].append(round(dur * 1000) if isinstance(dur, (int, float)) else -1)
        ints["pid"].append(pid)
        ints["tid"].append(tid if isinstance(tid, int) else -1)
        ints["external_id"].append(_int(args.get("External id")))
        ints["correlation"].append(_int(args.get("correlation")))
        ints["seq_num"].append(_int(next((args[k] for k in SEQ_KEYS if k in args), None)))
        ints["stream"].append(_int(args.get("stream")))
        ints["device"].append(_int(args.get("device", args.get("Device Id"))))
        ints["mem_bytes"].append(_int(args.get("Bytes")) if "Bytes" in args else 0)
        ints["mem_device_type"].append(_int(args.get("Device Type")))
        self.name.append(self.sid(str(ev.get("name", ""))))
        self.cat.append(self.sid(str(ev.get("cat", ""))))
        self.ph.append(ord(ph[0]))
        dims = args.get("Input Dims")
        self.shapes.append(self.sid(shapes_text(dims)) if dims is not None else -1)
        self.group.append(self.sid(str(args[GROUP_KEY])) if args.get(GROUP_KEY) is not None else -1)
        if ev.get("cat") in OP_CATS:
            self.pids[pid] = self.pids.get(pid, 0) + 1

    def arrays(self) -> dict[str, np.ndarray]:
        out = {k: np.frombuffer(v, dtype=np.int64) if len(v) else np.zeros(0, np.int64) for k, v in self.ints.items()}
        for key, arr, dtype in (("name", self.name, np.int32), ("cat", self.cat, np.int32),
                                ("shapes", self.shapes, np.int32), ("ph", self.ph, np.uint8),
                                ("group", self.group, np.int32)):
            out[key] = np.frombuffer(arr, dtype=dtype) if len(arr) else np.zeros(0, dtype)
        return out


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _shapes_fast(dims: Any) -> str:
    text = str(dims)
    return text if "[[[" not in text and isinstance(dims, list) else shapes_text(dims)


def shapes_text(dims: Any) -> str:
    """An op's input shapes as ``torch``'s ``key_averages(group_by_input_shape=True)`` prints them:
    a tensor list (``[[[5]], ...]`` in the trace) counts as no shape, as torch records it."""
    if not isinstance(dims, list):
        return "[]"
    kept = [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else [] for d in dims]
    return str(kept)


def _open(path: Path) -> IO[bytes]:
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return cast("IO[bytes]", gzip.GzipFile(path, "rb"))
    return open(path, "rb")


def _head_meta(head: bytes) -> dict[str, Any]:
    """The trace-level keys before ``traceEvents`` (ijson events over the kept head)."""
    meta: dict[str, Any] = {}
    builder: Any = None
    key: str | None = None
    depth = 0
    try:
        for prefix, event, value in ijson.parse(head, use_float=True):
            if builder is not None:
                builder.event(event, value)
                depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
                if depth == 0:
                    meta[str(key)], builder = builder.value, None
            elif prefix == "" and event == "map_key":
                if value == "traceEvents":
                    break
                key = value
            elif key is not None and prefix == key:
                builder = ijson.ObjectBuilder()
                builder.event(event, value)
                depth = 1 if event in ("start_map", "start_array") else 0
                if depth == 0:
                    meta[key], builder = builder.value, None
    except ijson.JSONError:
        pass     # the head ends inside the events: what came before is kept
    return meta


def _tail_meta(tail: bytes) -> dict[str, Any]:
    """The keys after the ``traceEvents`` array (``traceName``): the last ``]`` whose rest reads as
    the end of an object."""
    text = tail.decode("utf-8", "replace")
    pos = len(text)
    while True:
        pos = text.rfind("]", 0, pos)
        if pos < 0:
            return {}
        rest = text[pos + 1:].strip()
        if rest.startswith(","):
            try:
                got = json.loads("{" + rest[1:])
            except ValueError:
                continue
            if isinstance(got, dict):
                return got
        elif rest == "}":
            return {}


class _UnusualError(Exception):
    """Something the json fast path does not handle: the ijson path reads the file instead."""


def _no_constant(name: str) -> Any:
    raise _UnusualError(name)    # NaN/Infinity: ijson refuses them, so the ijson path words the error


class _Text:
    """A bounded text buffer over the tap: ``more()`` drops what was parsed and decodes the next bytes."""

    def __init__(self, tap: _Tap) -> None:
        self.tap, self.buf, self.eof = tap, "", False
        self.dec = codecs.getincrementaldecoder("utf-8")()

    def more(self, pos: int) -> int:
        """Keep ``buf[pos:]`` and append the next bytes; the new position of ``pos``."""
        if self.eof or len(self.buf) - pos > BUF_LIMIT:
            raise _UnusualError("end of input")
        data = self.tap.read(READ_SIZE)
        self.eof = not data
        self.buf = self.buf[pos:] + self.dec.decode(data, final=self.eof)
        return 0


def _fast_read(path: Path) -> tuple[_Columns, _Tap, int] | None:
    """The events decoded one at a time by ``json``'s C decoder over a bounded text buffer; None
    for anything unusual (damaged, foreign or oddly shaped input), which the ijson path then reads."""
    cols = _Columns()
    try:
        raw = _open(path)
        with raw:
            tap = _Tap(raw)
            seen = _fast_events(_Text(tap), cols)
            while tap.read(READ_SIZE):
                pass        # the tail's keys (traceName) are read from the tap
        return cols, tap, seen
    except (_UnusualError, ValueError, OSError, EOFError, RecursionError, MemoryError):
        return None


def _skip(buf: str, pos: int) -> int:
    m = _WS.match(buf, pos)
    return m.end() if m else pos


def _fast_events(text: _Text, cols: _Columns) -> int:
    decode = json.JSONDecoder(parse_constant=_no_constant).raw_decode
    ws, sep = _skip, _SEP.match
    pos = 0
    while len(text.buf) < 2:
        pos = text.more(pos)
    pos = ws(text.buf, pos)
    if text.buf[pos:pos + 1] != "{":
        raise _UnusualError("not an object")
    pos += 1
    while True:     # the top-level keys before traceEvents
        m = _KEY.match(text.buf, pos)
        if m is None or m.end() == len(text.buf):
            pos = text.more(pos)
            continue
        if json.loads(m.group(1)) == "traceEvents":
            pos = m.end()
            break
        try:
            _, end = decode(text.buf, m.end())
            m2 = sep(text.buf, end)
            if m2 is None or m2.group(1) != "," or m2.end() == len(text.buf):
                raise ValueError
        except ValueError:
            pos = text.more(pos)
            continue
        pos = m2.end()
    while len(text.buf) - pos < 2:
        pos = text.more(pos)
    if text.buf[pos] != "[":
        raise _UnusualError("traceEvents is not an array")
    pos = ws(text.buf, pos + 1)
    while pos == len(text.buf):
        pos = ws(text.buf, text.more(pos))
    chunk: list[Any] = []
    seen = 0
    base_ns = 0
    closed = text.buf[pos:pos + 1] == "]"
    if closed:
        pos += 1
    while not closed:
        buf = text.buf
        try:
            ev, end = decode(buf, pos)
        except ValueError:
            if ws(buf, pos) > pos:
                pos = ws(buf, pos)      # the buffer ended inside the whitespace before this event
            else:
                pos = text.more(pos)
            continue
        m = sep(buf, end)
        if m is None or m.end() == len(buf):
            if ws(buf, end) < len(buf) and m is None:
                raise _UnusualError("no comma between events")
            pos = text.more(pos)
            continue
        if type(ev) is not dict:
            raise _UnusualError("an event that is not an object")
        chunk.append(ev)
        pos = m.end()
        closed = m.group(1) == "]"
        if len(chunk) == CHUNK or closed:
            if not seen:   # the metadata (baseTimeNanoseconds) precede the events in Kineto's files
                base_ns = _base_ns(_head_meta(bytes(text.tap.head)))
            cols.add_chunk(chunk, base_ns)
            seen += len(chunk)
            chunk = []
    rest = text.buf[pos:]
    while not text.eof:
        text.more(len(text.buf))
        rest += text.buf
        if len(rest) > BUF_LIMIT:
            raise _UnusualError("a long tail")
    if '"traceEvents"' in rest:
        raise _UnusualError("a second traceEvents")
    json.loads('{"traceEvents": []' + rest)    # the document must end as ijson would accept it
    return seen


def read_trace(path: str | Path, *, clock_offset_ns: int = 0, clock_uncertainty_ns: int | None = None,
               pid: int | None = None, rank: int | None = None) -> TorchTrace:
    """Read ``path`` (a Kineto Chrome trace, plain or gzip). A corrupt, truncated or foreign file
    raises :class:`UserError` naming it."""
    path = Path(path)
    try:
        raw = _open(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the torch trace ({exc.strerror or exc})") from None
    fast = _fast_read(path)
    if fast is not None:
        raw.close()
        cols, tap, seen = fast
    else:
        cols, tap, seen = _ijson_read(path, raw)
    return _finish(path, cols, tap, seen, clock_offset_ns, clock_uncertainty_ns, pid, rank)


def _ijson_read(path: Path, raw: IO[bytes]) -> tuple[_Columns, _Tap, int]:
    cols = _Columns()
    base_ns = 0
    tap = _Tap(raw)
    seen = 0
    try:
        with raw:
            events = ijson.items(tap, "traceEvents.item", use_float=True, buf_size=1 << 18)
            chunk: list[Any] = []
            for ev in events:
                chunk.append(ev)
                if len(chunk) == CHUNK:
                    if not seen:   # the metadata (baseTimeNanoseconds) precede the events in Kineto's files
                        base_ns = _base_ns(_head_meta(bytes(tap.head)))
                    cols.add_chunk(chunk, base_ns)
                    seen += len(chunk)
                    chunk = []
            if chunk:
                if not seen:
                    base_ns = _base_ns(_head_meta(bytes(tap.head)))
                cols.add_chunk(chunk, base_ns)
                seen += len(chunk)
    except (ijson.JSONError, EOFError, OSError, gzip.BadGzipFile, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path}: the torch trace is cut short or corrupt after {seen} events "
                        f"({_why(exc)})") from None
    return cols, tap, seen


def _finish(path: Path, cols: _Columns, tap: _Tap, seen: int, clock_offset_ns: int,
            clock_uncertainty_ns: int | None, pid: int | None, rank: int | None) -> TorchTrace:
    meta = _head_meta(bytes(tap.head))
    meta.update(_tail_meta(tap.tail))
    if "traceEvents" not in tap.head.decode("utf-8", "replace") and not seen:
        raise UserError(f"{path}: no traceEvents: not a PyTorch profiler (Kineto) trace")
    out = cols.arrays()
    if clock_offset_ns:
        out["ts_ns"] = out["ts_ns"] + clock_offset_ns
    dist = meta.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    found_rank = rank if rank is not None else _int(dist.get("rank"))
    main_pid = pid if pid is not None else (max(cols.pids, key=cols.pids.__getitem__) if cols.pids else -1)
    return TorchTrace(str(path), main_pid, found_rank if found_rank >= 0 else None, meta, cols.strings, out,
                      clock_offset_ns, clock_uncertainty_ns, cols.skipped, cols.thread_names)


def _base_ns(meta: dict[str, Any]) -> int:
    base = meta.get("baseTimeNanoseconds")
    return base if isinstance(base, int) and not isinstance(base, bool) else 0


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:120]


def merge(traces: list[TorchTrace]) -> TorchTrace:
    """One process's traces (a schedule's cycles) as one: columns joined, string ids remapped."""
    if len(traces) == 1:
        return traces[0]
    strings: list[str] = []
    ids: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {k: [] for k in traces[0].cols}
    for tr in traces:
        remap = np.array([ids.setdefault(s, len(ids)) for s in tr.strings] or [0], np.int32)
        for k, col in tr.cols.items():
            if k in ("name", "cat", "shapes", "group"):
                col = np.where(col >= 0, remap[np.maximum(col, 0)], -1).astype(np.int32)
            parts[k].append(col)
    strings = list(ids)
    first = traces[0]
    return TorchTrace(first.path, first.pid, first.rank, first.meta, strings,
                      {k: np.concatenate(v) for k, v in parts.items()}, first.clock_offset_ns,
                      first.clock_uncertainty_ns, sum(t.skipped for t in traces),
                      {k: v for t in traces for k, v in t.thread_names.items()})
