"""The torch traces' events for gpuscope's Perfetto export, on the timeline's clock.

Each profiled process keeps its pid; its torch CPU events go on a track per thread named
``torch <tid>`` (beside, not on, the thread's NVTX track: the two need not nest), its GPU events
on a track per device and stream. A trace with a measured clock offset is on CLOCK_MONOTONIC and
maps through the timeline's ``mono_base_ns``; one without, on its wall clock, through
``wall_base_ns``. A trace neither maps to is left out and named in ``skipped``.
"""

from __future__ import annotations

import json
from typing import Iterator, Sequence

import numpy as np

from gpuscope.torchtrace.ops import DEVICE_CATS
from gpuscope.torchtrace.reader import TorchTrace

TORCH_TRACK = 1 << 26          # + tid: a thread's torch ops
TORCH_GPU_TRACK = 1 << 27      # + device * 2**16 + stream: GPU events of a torch trace


def _us(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{sign}{q}.{r:03d}"


def _base(tr: TorchTrace, wall_base_ns: int | None, mono_base_ns: int | None) -> int | None:
    """The ns to subtract from the trace's ``ts_ns`` to get timeline time."""
    on_mono = tr.clock_uncertainty_ns is not None or tr.clock_offset_ns != 0
    return mono_base_ns if on_mono else wall_base_ns


def events(traces: Sequence[TorchTrace], wall_base_ns: int | None, mono_base_ns: int | None,
           skipped: list[str] | None = None) -> Iterator[str]:
    """Chrome trace-event JSON strings of every X/i event of ``traces`` (memory records left out)."""
    for tr in traces:
        base = _base(tr, wall_base_ns, mono_base_ns)
        if base is None:
            if skipped is not None:
                skipped.append(f"{tr.path}: no clock in common with the timeline")
            continue
        yield from _trace_events(tr, base)


def _trace_events(tr: TorchTrace, base: int) -> Iterator[str]:
    c = tr.cols
    gpu = tr.is_cat(*DEVICE_CATS)
    memory = c["name"] == tr.string_id("[memory]")
    rows = np.flatnonzero(~memory)
    names = [json.dumps(s) for s in tr.strings]
    tracks: dict[int, str] = {}
    for i in rows.tolist():
        if gpu[i]:
            dev, stream = max(int(c["device"][i]), 0), max(int(c["stream"][i]), 0)
            tid = TORCH_GPU_TRACK + dev * 65536 + stream
            tracks.setdefault(tid, f"torch GPU {dev} stream {stream}")
        else:
            tid = TORCH_TRACK + max(int(c["tid"][i]), 0)
            tracks.setdefault(tid, f"torch {int(c['tid'][i])}")
        cat = names[c["cat"][i]]
        ts = _us(int(c["ts_ns"][i]) - base)
        if c["ph"][i] == ord("X"):
            yield (f'{{"ph":"X","cat":{cat},"name":{names[c["name"][i]]},"pid":{tr.pid},"tid":{tid},'
                   f'"ts":{ts},"dur":{_us(max(int(c["dur_ns"][i]), 0))}}}')
        else:
            yield f'{{"ph":"i","s":"t","cat":{cat},"name":{names[c["name"][i]]},"pid":{tr.pid},"tid":{tid},"ts":{ts}}}'
    for tid, label in sorted(tracks.items()):
        yield json.dumps({"ph": "M", "name": "thread_name", "pid": tr.pid, "tid": tid, "args": {"name": label}})


def run_events(run_dir: str | None, wall_base_ns: int | None, mono_base_ns: int | None) -> Iterator[str]:
    """The torch events of a run folder's traces (none when it has none; unreadable ones left out:
    ``gpuscope report --torch-ops`` names them)."""
    if not run_dir:
        return
    from gpuscope.torchtrace.run import has_traces, load_run

    if has_traces(run_dir):
        yield from events(load_run(run_dir).traces, wall_base_ns, mono_base_ns)
