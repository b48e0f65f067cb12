"""What the GPU findings look for in a run's CUDA trace (rules: gpuscope/findings/gpu_rules.py).

- :func:`time_sliced`: two or more processes with real work on one GPU whose work almost never
  overlaps while they alternate: the GPU takes turns between their CUDA contexts.
- :func:`launch_bound`: a process whose GPU sat idle between its own work items, waiting for the
  next launch, longer than that work ran.
- :func:`pageable_copies`: host-to-device copies from pageable (not pinned) host memory, repeated
  over the process's GPU activity (a step loop), not a one-off load.

Thresholds are module constants, documented in docs/GPU-SHARING.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscope.gpu import sharing

MIN_SHARE = 0.05            # a process counts on a device when it has at least this share of the busy time
MAX_OVERLAP = 0.05          # "almost never overlap": concurrent time under this part of the 2nd process's GPU time
MIN_SWITCHES = 2            # A, B, A at least: they take turns, not one after the other
MIN_ITEMS = 200             # launch-bound needs this many work items of the process on the device
GAP_MAX_NS = 1_000_000      # longer idle gaps are pauses of the program (I/O, data), not launch waits
MIN_PAGEABLE = 10           # pageable host-to-device copies in one process
LOOP_SPREAD = 0.25          # ... spread over at least this part of the process's GPU activity
HTOD, PAGEABLE = 1, 0       # nsys copyKind Host-to-Device; srcKind Pageable (2022.4 .. 2024.2)


@dataclass(frozen=True)
class TimeSliced:
    """A device whose processes took turns on it (:func:`time_sliced`)."""

    device: int
    sharing: sharing.DeviceSharing
    pids: tuple[int, ...]           # the processes with a real share, largest first
    overlap: float                  # concurrent time / the second process's GPU time


def time_sliced(found: list[sharing.DeviceSharing]) -> list[TimeSliced]:
    """Devices where two or more processes took turns, almost never running at once."""
    out = []
    for d in found:
        real = [p for p in d.processes if p.share >= MIN_SHARE]
        if len(real) < 2 or d.switches < MIN_SWITCHES:
            continue
        second = real[1].gpu_ns
        overlap = d.concurrent_ns / second if second else 0.0
        if overlap <= MAX_OVERLAP:
            out.append(TimeSliced(d.device, d, tuple(p.pid for p in real), overlap))
    return out


@dataclass(frozen=True)
class LaunchBound:
    """A process that left the GPU idle waiting for its next launch (:func:`launch_bound`)."""

    device: int
    pid: int
    items: int
    gpu_ns: int
    gap_ns: int                     # idle time between its work items, waiting for a launch
    median_item_ns: int


def launch_bound(work: sharing.Work) -> list[LaunchBound]:
    """Processes whose idle gaps between their own work items outweigh the work itself.

    A gap counts when the GPU ran nothing at all in it (no other process filled it), it is
    shorter than ``GAP_MAX_NS``, and, where the launch is known, the next item was launched
    after the previous one ended (the queue had run dry).
    """
    out = []
    for device, pids, unions, counts in sharing.per_device(work):
        sw = sharing.sweep(unions)
        busy = sharing.busy_cover(sw)
        for pid, u, n in zip(pids, unions, counts):
            if n < MIN_ITEMS or len(u.start) < 2:
                continue
            gs, ge = u.end[:-1], u.start[1:]
            idle = (busy.at(ge) - busy.at(gs)) == 0
            dry = (u.first_launch[1:] < 0) | (u.first_launch[1:] >= gs)
            counted = idle & dry & (ge - gs < GAP_MAX_NS)
            gap = int((ge - gs)[counted].sum())
            gpu = int((u.end - u.start).sum())
            if gap > gpu:
                med = int(np.median(_item_lengths(work, device, pid)))
                out.append(LaunchBound(int(device), int(pid), int(n), gpu, gap, med))
    return out


def _item_lengths(work: sharing.Work, device: int, pid: int) -> np.ndarray:
    sel = (work.device == device) & (work.pid == pid)
    return work.end[sel] - work.start[sel]


@dataclass(frozen=True)
class PageableCopies:
    """A process's repeated copies from pageable host memory (:func:`pageable_copies`)."""

    pid: int
    device: int
    copies: int
    nbytes: int
    copy_ns: int
    spread: float                   # first to last such copy / the process's GPU activity span


def pageable_copies(start: np.ndarray, end: np.ndarray, pid: np.ndarray, device: np.ndarray,
                    copy_kind: np.ndarray, src_kind: np.ndarray, nbytes: np.ndarray,
                    span: dict[int, tuple[int, int]]) -> list[PageableCopies]:
    """Processes that copied from pageable host memory to the GPU again and again.

    ``span``: per pid, the first start and last end of all its GPU work.
    """
    hit = (copy_kind == HTOD) & (src_kind == PAGEABLE)
    out = []
    for p in np.unique(pid[hit]).tolist():
        mine = hit & (pid == p)
        n = int(mine.sum())
        lo, hi = span.get(int(p), (int(start[mine].min()), int(end[mine].max())))
        spread = (int(start[mine].max()) - int(start[mine].min())) / max(1, hi - lo)
        if n >= MIN_PAGEABLE and spread >= LOOP_SPREAD:
            devs = device[mine]
            out.append(PageableCopies(int(p), int(np.bincount(devs - devs.min()).argmax() + devs.min()), n,
                                      int(nbytes[mine].sum()), int((end[mine] - start[mine]).sum()), spread))
    return out


def work_spans(work: sharing.Work) -> dict[int, tuple[int, int]]:
    """Per pid: the first start and the last end of its GPU work."""
    out: dict[int, tuple[int, int]] = {}
    for p in np.unique(work.pid).tolist():
        sel = work.pid == p
        out[int(p)] = (int(work.start[sel].min()), int(work.end[sel].max()))
    return out
