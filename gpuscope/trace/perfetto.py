"""Write a :class:`Timeline` as Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev).

- ``M`` metadata names every process and thread track;
- NVTX push/pop ranges are ``X`` (complete) events on their thread; start/end ranges, which may
  overlap without nesting, go on a separate "<thread> start/end" track;
- marks are ``i`` (instant, thread scope) events;
- kernels and memcpy/memset are ``X`` events on one track per (device, stream) in their process;
- CUDA API and OS runtime calls are ``X`` events on their thread (``include_calls``).

Times are µs as decimal numbers with all nine ns digits kept (``ts = 1234.567`` is 1234567 ns).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import IO, Iterable, Iterator

from gpuscope.trace import timeline as T

STARTEND_TRACK = 1 << 24          # + tid: the start/end range track of a thread
GPU_TRACK = 1 << 25               # + device * 2**16 + stream: a CUDA stream track


def us(ns: int) -> str:
    """Integer ns as an exact decimal µs string."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{sign}{q}.{r:03d}"


class _Names:
    def __init__(self, tl: T.Timeline) -> None:
        self.tl = tl
        self.cache: dict[int, str] = {}

    def __call__(self, sid: int, default: str = "(unnamed)") -> str:
        out = self.cache.get(sid)
        if out is None:
            out = json.dumps(self.tl.strings.get(sid) or default)
            self.cache[sid] = out
        return out


def _meta(kind: str, pid: int, tid: int, name: str) -> str:
    return json.dumps({"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}})


def _metadata(tl: T.Timeline) -> Iterator[str]:
    for pid in tl.processes.pid.tolist():
        yield _meta("process_name", pid, 0, f"{tl.process_name(pid)} [{pid}]")
    names = {(p, t): n for p, t, n in zip(tl.threads.pid.tolist(), tl.threads.tid.tolist(),
                                           tl.threads.name_id.tolist())}
    r = tl.ranges
    tracks = set(zip(r.pid.tolist(), r.tid.tolist(), r.style.tolist()))
    threads = {(p, t) for p, t, _ in tracks} | set(names) | set(zip(tl.marks.pid.tolist(), tl.marks.tid.tolist()))
    for pid, tid in sorted(threads):
        label = tl.strings.get(names.get((pid, tid), -1)) or f"thread {tid}"
        yield _meta("thread_name", pid, tid, f"{label} [{tid}]")
    for pid, tid in sorted({(p, t) for p, t, s in tracks if s == T.STYLE_STARTEND}):
        yield _meta("thread_name", pid, STARTEND_TRACK + tid, f"thread {tid} start/end ranges")
    gpu = set(zip(tl.kernels.pid.tolist(), tl.kernels.device.tolist(), tl.kernels.stream.tolist()))
    gpu |= set(zip(tl.memops.pid.tolist(), tl.memops.device.tolist(), tl.memops.stream.tolist()))
    for pid, dev, stream in sorted(gpu):
        yield _meta("thread_name", pid, GPU_TRACK + dev * 65536 + stream, f"GPU {dev} stream {stream}")


def _ranges(tl: T.Timeline, name: _Names) -> Iterator[str]:
    r = tl.ranges
    cols = zip(r.start_ns.tolist(), r.end_ns.tolist(), r.pid.tolist(), r.tid.tolist(), r.name_id.tolist(),
               r.style.tolist(), r.source.tolist(), r.depth.tolist())
    for s, e, pid, tid, nid, style, src, depth in cols:
        track = tid if style == T.STYLE_PUSHPOP else STARTEND_TRACK + tid
        yield (f'{{"ph":"X","cat":"{T.SOURCE_NAMES[src]}","name":{name(nid)},"pid":{pid},"tid":{track},'
               f'"ts":{us(s)},"dur":{us(e - s)},"args":{{"depth":{depth}}}}}')


def _marks(tl: T.Timeline, name: _Names) -> Iterator[str]:
    m = tl.marks
    for s, pid, tid, nid, src in zip(m.start_ns.tolist(), m.pid.tolist(), m.tid.tolist(), m.name_id.tolist(),
                                     m.source.tolist()):
        yield (f'{{"ph":"i","s":"t","cat":"{T.SOURCE_NAMES[src]}","name":{name(nid)},"pid":{pid},'
               f'"tid":{tid},"ts":{us(s)}}}')


def _gpu(table, cat: str, name: _Names) -> Iterator[str]:
    for s, e, pid, dev, stream, nid, corr in zip(
            table.start_ns.tolist(), table.end_ns.tolist(), table.pid.tolist(), table.device.tolist(),
            table.stream.tolist(), table.name_id.tolist(), table.correlation.tolist()):
        yield (f'{{"ph":"X","cat":"{cat}","name":{name(nid)},"pid":{pid},"tid":{GPU_TRACK + dev * 65536 + stream},'
               f'"ts":{us(s)},"dur":{us(e - s)},"args":{{"correlation":{corr}}}}}')


def _calls(table: T.Calls, cat: str, name: _Names) -> Iterator[str]:
    for s, e, pid, tid, nid in zip(table.start_ns.tolist(), table.end_ns.tolist(), table.pid.tolist(),
                                   table.tid.tolist(), table.name_id.tolist()):
        yield (f'{{"ph":"X","cat":"{cat}","name":{name(nid)},"pid":{pid},"tid":{tid},'
               f'"ts":{us(s)},"dur":{us(e - s)}}}')


def events(tl: T.Timeline, include_calls: bool = True) -> Iterator[str]:
    """Every trace event of ``tl`` as a JSON object string."""
    name = _Names(tl)
    yield from _metadata(tl)
    yield from _ranges(tl, name)
    yield from _marks(tl, name)
    yield from _gpu(tl.kernels, "cuda_kernel", name)
    yield from _gpu(tl.memops, "cuda_memop", name)
    if include_calls:
        yield from _calls(tl.cuda_api, "cuda_api", name)
        yield from _calls(tl.osrt, "osrt", name)


def write(tl: T.Timeline, out: str | Path | IO[str], include_calls: bool = True, extra: Iterable[str] = ()) -> int:
    """Write the trace JSON to ``out`` (a path or a text stream); returns the number of events.
    ``extra``: more event JSON strings on the same clock (the run's torch traces)."""
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8") as fh:
            return write(tl, fh, include_calls, extra)
    other = {"generator": "gpuscope", "wall_base_ns": tl.wall_base_ns, "mono_base_ns": tl.mono_base_ns}
    out.write('{"displayTimeUnit":"ns","otherData":' + json.dumps(other) + ',"traceEvents":[\n')
    n = 0
    for ev in itertools.chain(events(tl, include_calls), extra):
        out.write(ev if n == 0 else ",\n" + ev)
        n += 1
    out.write("\n]}\n")
    return n


def counts(tl: T.Timeline, include_calls: bool = True) -> dict[str, int]:
    """How many events of each phase :func:`write` emits for ``tl`` (metadata excluded)."""
    x = len(tl.ranges) + len(tl.kernels) + len(tl.memops)
    if include_calls:
        x += len(tl.cuda_api) + len(tl.osrt)
    return {"X": x, "i": len(tl.marks)}


__all__ = ["write", "events", "counts", "us"]
