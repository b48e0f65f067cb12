"""Who ran when on each GPU, from the CUDA trace of an nsys export (docs/GPU-SHARING.md).

Work is every kernel, memcpy and memset of a :class:`~gpuscope.trace.timeline.Timeline`. Per
device: busy time (any work), concurrent time (work of two or more processes at once), switches
(the sole owner of the GPU changes from one process to another) and the time those switches cost
(the next process's work was already launched, yet the GPU had nothing running). Per process on
a device: its GPU time (the union of its work), its share of the busy time, and the time its work
was queued behind another process's: launch-to-start windows of its work (launch = the CUDA API
call, joined on correlation id and pid) while the GPU ran only other processes' work. A process
alone on a GPU therefore has no queued time, whatever its own launch latency.

Everything is numpy over interval columns: one stable sort by (device, process), a union of each
process's work, and one sweep of the union boundaries per device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from gpuscope.trace import timeline as T

_CORR_BITS = 40
_NO_TIME = -1


@dataclass(frozen=True)
class Work:
    """GPU work items as columns: device time interval, process, device, and the launch (API call
    start, ``-1`` where the export has no matching CUDA API call)."""

    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    launch: np.ndarray

    def __len__(self) -> int:
        return int(len(self.start))


@dataclass(frozen=True)
class ProcessShare:
    """One process on one device."""

    pid: int
    items: int                 # kernels + copies + memsets
    gpu_ns: int                # union of its work on the device
    share: float               # gpu_ns / the device's busy time
    queued_ns: int | None      # launch-to-start time while only other processes ran; None: no launches


@dataclass(frozen=True)
class DeviceSharing:
    """One device: who ran on it and what sharing it cost."""

    device: int
    first_ns: int
    last_ns: int
    busy_ns: int
    concurrent_ns: int
    switches: int
    switch_ns: int | None      # None when the export has no launch times to tell waiting from idle
    processes: tuple[ProcessShare, ...]

    @property
    def span_ns(self) -> int:
        return self.last_ns - self.first_ns


@dataclass(frozen=True)
class Lane:
    """What one device ran over time: segments ``[start, end)`` and their owner pid (-1: several at once)."""

    device: int
    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray


# --------------------------------------------------------------------------- input

NODE_SPAN = 1 << 16      # a job across nodes: device code = node index * NODE_SPAN + device


def work_of(tl: T.Timeline) -> Work:
    """The kernels, memcpys and memsets of ``tl`` as one :class:`Work`, launches joined from ``cuda_api``.

    A job across nodes (``tl.groups``) has GPU 0 on every node: the device becomes a code that
    :func:`device_of` turns back into (node, device).
    """
    k, m = tl.kernels, tl.memops
    pid = np.concatenate([k.pid, m.pid]).astype(np.int64)
    corr = np.concatenate([k.correlation, m.correlation]).astype(np.int64)
    start = np.concatenate([k.start_ns, m.start_ns]).astype(np.int64)
    device = np.concatenate([k.device, m.device]).astype(np.int64)
    if tl.groups and len(pid):
        nodes = sorted(set(tl.groups.values()))
        index = {p: nodes.index(g) for p, g in tl.groups.items()}
        device = device + np.array([index.get(p, 0) for p in pid.tolist()], dtype=np.int64) * NODE_SPAN
    # a damaged row that ends before it starts counts as an instant, never as negative time
    return Work(start=start, end=np.maximum(np.concatenate([k.end_ns, m.end_ns]).astype(np.int64), start),
                pid=pid, device=device, launch=launches(tl.cuda_api, pid, corr))


def device_of(tl: T.Timeline, code: int) -> tuple[str | None, int]:
    """(node label or None, device number) of a device code of :func:`work_of`."""
    if not tl.groups:
        return None, code
    return sorted(set(tl.groups.values()))[code // NODE_SPAN], code % NODE_SPAN


def launches(api: T.Calls, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Start of the CUDA API call of each (pid, correlation id), ``-1`` where there is none.

    Correlation ids are unique only within a process, so the key is (pid, correlation).
    """
    out = np.full(len(pid), _NO_TIME, dtype=np.int64)
    if not len(api) or not len(pid):
        return out
    mask = (1 << _CORR_BITS) - 1
    api_key = (api.pid.astype(np.int64) << _CORR_BITS) | (api.correlation.astype(np.int64) & mask)
    order = np.argsort(api_key, kind="stable")
    sorted_key = api_key[order]
    key = (pid << _CORR_BITS) | (corr & mask)
    idx = np.minimum(np.searchsorted(sorted_key, key), len(sorted_key) - 1)
    hit = (sorted_key[idx] == key) & (corr > 0)
    out[hit] = api.start_ns[order[idx[hit]]]
    return out


# --------------------------------------------------------------------------- grouping and unions

def _groups(work: Work) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, bounds, group_device, group_pid): ``order`` sorts the items by (device, pid) stably,
    group ``g`` is ``order[bounds[g]:bounds[g + 1]]``."""
    dev_ids, dev_code = _codes(work.device)
    pid_ids, pid_code = _codes(work.pid)
    group = dev_code * len(pid_ids) + pid_code
    small = np.int16 if len(dev_ids) * len(pid_ids) < 2**15 else np.int64
    order = np.argsort(group.astype(small), kind="stable")   # radix sort for int16 keys
    counts = np.bincount(group, minlength=len(dev_ids) * len(pid_ids))
    present = np.flatnonzero(counts)
    bounds = np.r_[0, np.cumsum(counts[present])]
    return order, bounds, dev_ids[present // len(pid_ids)], pid_ids[present % len(pid_ids)]


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, code of each value): a bincount when the values are small."""
    lo, hi = int(values.min()), int(values.max())
    if lo >= 0 and hi < 1 << 23:
        seen = np.bincount(values, minlength=hi + 1) > 0
        ids = np.flatnonzero(seen)
        lut = np.cumsum(seen) - 1
        return ids.astype(np.int64), lut[values].astype(np.int64)
    ids, inv = np.unique(values, return_inverse=True)
    return ids.astype(np.int64), inv.reshape(-1).astype(np.int64)


@dataclass(frozen=True)
class _Union:
    """One process's work on one device as disjoint intervals (sorted), with its items."""

    start: np.ndarray
    end: np.ndarray
    first_launch: np.ndarray   # launch of each interval's first item (-1 unknown)
    items_start: np.ndarray
    items_launch: np.ndarray


def _union(start: np.ndarray, end: np.ndarray, launch: np.ndarray) -> _Union:
    if len(start) > 1 and bool((start[1:] < start[:-1]).any()):
        o = np.argsort(start, kind="stable")
        start, end, launch = start[o], end[o], launch[o]
    reach = np.maximum.accumulate(end)
    new = np.empty(len(start), dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(start) - 1]
    return _Union(start[first], reach[last], launch[first], start, launch)


class _Cover:
    """Disjoint sorted intervals ``[xs, xe)`` and how much of them lies before a time."""

    _FLOOR = -(1 << 61)     # a sentinel interval before every time: each lookup finds one

    def __init__(self, xs: np.ndarray, xe: np.ndarray) -> None:
        self._starts = np.r_[np.int64(self._FLOOR), xs]
        self._lens = np.r_[np.int64(0), xe - xs]
        self._before = np.r_[np.int64(0), np.cumsum(self._lens)[:-1]]

    def at(self, t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self._starts, t, side="right") - 1
        return self._before[i] + np.minimum(t - self._starts[i], self._lens[i])


# --------------------------------------------------------------------------- the sweep

@dataclass(frozen=True)
class _Sweep:
    """Union boundaries of every process of a device in time order, and the state after each."""

    t: np.ndarray          # boundary times
    count: np.ndarray      # processes with work after the boundary
    owner: np.ndarray      # the process index when count == 1 (else meaningless)
    union: np.ndarray      # at a union start: its index among all the unions' intervals, else -1


def sweep(unions: list[_Union]) -> _Sweep:
    starts = np.concatenate([u.start for u in unions])
    ends = np.concatenate([u.end for u in unions])
    sizes = np.array([len(u.start) for u in unions])
    code = np.repeat(np.arange(1, len(unions) + 1, dtype=np.int32), sizes)
    lo = int(starts.min())
    # ends sort before starts at the same time: touching work is not concurrent
    key = np.concatenate([(ends - lo) * 2, (starts - lo) * 2 + 1])
    order = np.argsort(key, kind="stable")
    key = key[order]
    is_start = (key & 1).astype(bool)
    n_end = len(ends)
    delta = is_start.astype(np.int32) * 2 - 1
    signed = np.concatenate([code, code])[np.where(is_start, order - n_end, order)] * delta
    union = np.where(is_start, order - n_end, -1)
    return _Sweep((key >> 1) + lo, np.cumsum(delta, dtype=np.int32), np.cumsum(signed, dtype=np.int32) - 1, union)


def _switches(sw: _Sweep, seg: np.ndarray, ready: np.ndarray | None) -> tuple[int, int | None]:
    """(number of switches, time they cost): the sole owner changes between two sole stretches.
    ``ready``: per union interval, when its first item could have started (-1 unknown); None: no launches."""
    has_launch = ready is not None
    state = sw.count[:-1]
    sole = np.flatnonzero((state == 1) & (seg > 0))
    if len(sole) < 2:
        return 0, (0 if has_launch else None)
    owners = sw.owner[sole]
    change = np.flatnonzero(owners[1:] != owners[:-1]) + 1      # index into sole of each switch
    if not has_launch:
        return int(len(change)), None
    prev_end_k = sole[change - 1] + 1
    begin = sw.t[sole[change]]
    assert ready is not None
    # a stretch that begins with the start of the owner's work followed idle time; one that begins
    # with the end of another's was handed over while both ran: no gap, no cost (unknown = not counted)
    union = sw.union[sole[change]]
    at = np.where(union >= 0, ready[np.maximum(union, 0)], _NO_TIME)
    known = at >= 0
    ready_at = np.maximum(sw.t[prev_end_k], at)
    return int(len(change)), int(np.clip(begin - ready_at, 0, None)[known].sum())


def busy_cover(sw: _Sweep) -> _Cover:
    on = sw.count > 0
    edge = np.flatnonzero(on[1:] != on[:-1]) + 1
    first = np.r_[0, edge[on[edge]]] if on[0] else edge[on[edge]]
    return _Cover(sw.t[first], sw.t[edge[~on[edge]]])


_FLOOR_CANDIDATES = 64    # smallest delays tried first for the launch floor (exact: see _floor)


def _queued(u: _Union, busy: _Cover) -> tuple[int | None, np.ndarray]:
    """(launch-to-start time of this process's work while the GPU ran only others' work, when each
    union interval could have started at the earliest: its first launch plus :func:`_floor`)."""
    known = (u.items_launch >= 0) & (u.items_launch <= u.items_start)
    if not known.any():
        none = np.full(len(u.start), _NO_TIME, np.int64)
        return (None if not (u.items_launch >= 0).any() else 0), none
    a, b = u.items_launch[known], u.items_start[known]
    if len(a) > 1 and bool((a[1:] < a[:-1]).any()):
        o = np.argsort(a, kind="stable")
        a, b = a[o], b[o]
    own = _Cover(u.start, u.end)
    floor = _floor(a, b, busy, own)
    ready = np.where(u.first_launch >= 0, u.first_launch + floor, _NO_TIME)
    # the union of the windows [a, b): other processes' time inside it = busy time - own time
    reach = np.maximum.accumulate(b)
    first = np.flatnonzero(np.r_[True, a[1:] > reach[:-1]])
    last = np.r_[first[1:] - 1, len(a) - 1]
    return int(_inside(busy, a[first], reach[last]).sum() - _inside(own, a[first], reach[last]).sum()), ready


def _inside(cover: _Cover, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of ``cover`` inside each ``[lo, hi)``."""
    c = cover.at(np.concatenate([lo, hi]))
    return c[len(lo):] - c[:len(lo)]


def _floor(a: np.ndarray, b: np.ndarray, busy: _Cover, own: _Cover) -> int:
    """The process's smallest launch-to-start delay among its items that no other process's work
    held up (nothing but its own work ran between launch and start); 0 if there is none.

    The smallest delays are tried first: if one of them was not held up, no item outside them can
    have a smaller delay, so the answer is exact without looking at every item.
    """
    delay = b - a
    if len(delay) > _FLOOR_CANDIDATES:
        pick = np.argpartition(delay, _FLOOR_CANDIDATES - 1)[:_FLOOR_CANDIDATES]
        free = _inside(busy, a[pick], b[pick]) == _inside(own, a[pick], b[pick])
        if free.any():
            return int(delay[pick][free].min())
    free = _inside(busy, a, b) == _inside(own, a, b)
    return int(delay[free].min()) if free.any() else 0


# --------------------------------------------------------------------------- per device

def analyse(work: Work) -> list[DeviceSharing]:
    """Per device, ascending: busy, concurrent, switches and each process's share and queued time."""
    out: list[DeviceSharing] = []
    for device, pids, unions, counts in per_device(work):
        sw = sweep(unions)
        seg = np.diff(sw.t)
        state = sw.count[:-1]
        busy = int(seg[state >= 1].sum())
        has_launch = any(bool((u.items_launch >= 0).any()) for u in unions)
        bi = busy_cover(sw)
        procs, ready = [], []
        for pid, u, n in zip(pids, unions, counts):
            gpu = int((u.end - u.start).sum())
            queued, r = _queued(u, bi)
            ready.append(r)
            procs.append(ProcessShare(int(pid), int(n), gpu, gpu / busy if busy else 0.0, queued))
        switches, switch_ns = _switches(sw, seg, np.concatenate(ready) if has_launch else None)
        procs.sort(key=lambda p: (-p.gpu_ns, p.pid))
        out.append(DeviceSharing(int(device), int(sw.t[0]), int(sw.t[-1]), busy, int(seg[state >= 2].sum()),
                                 switches, switch_ns, tuple(procs)))
    return out


def per_device(work: Work) -> Iterator[tuple[int, np.ndarray, list[_Union], np.ndarray]]:
    """(device, pids, unions, item counts) for each device, in device order."""
    if not len(work):
        return
    order, bounds, g_dev, g_pid = _groups(work)
    g = 0
    while g < len(g_dev):
        h = g
        while h < len(g_dev) and g_dev[h] == g_dev[g]:
            h += 1
        unions = []
        for i in range(g, h):
            idx = order[bounds[i]:bounds[i + 1]]
            unions.append(_union(work.start[idx], work.end[idx], work.launch[idx]))
        yield int(g_dev[g]), g_pid[g:h], unions, np.diff(bounds[g:h + 1])
        g = h


def lanes(work: Work) -> list[Lane]:
    """Per device: who had work on it at each moment (pid, or -1 for several processes at once)."""
    out = []
    for device, pids, unions, _ in per_device(work):
        sw = sweep(unions)
        seg = np.diff(sw.t)
        state = sw.count[:-1]
        keep = (state >= 1) & (seg > 0)
        owner = np.where(state == 1, pids[np.clip(sw.owner[:-1], 0, len(pids) - 1)], -1)[keep]
        s, e = sw.t[:-1][keep], sw.t[1:][keep]
        # adjacent segments of one owner become one
        new = np.r_[True, (owner[1:] != owner[:-1]) | (s[1:] != e[:-1])]
        first = np.flatnonzero(new)
        last = np.r_[first[1:] - 1, len(s) - 1]
        out.append(Lane(int(device), s[first], e[last], owner[first].astype(np.int64)))
    return out


def device_lanes(tl: T.Timeline) -> list[Lane]:
    """:func:`lanes` of a Timeline's GPU work."""
    return lanes(work_of(tl))


def of_timeline(tl: T.Timeline) -> list[DeviceSharing]:
    """:func:`analyse` of a Timeline's GPU work."""
    return analyse(work_of(tl))
