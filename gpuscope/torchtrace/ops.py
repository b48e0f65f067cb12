"""The ``key_averages`` table of one trace, computed as ``torch.profiler`` computes it.

torch's definitions (torch/autograd/profiler.py, profiler_util.py), reproduced from the trace:
- an op's children are the CPU events of the same thread inside its interval (start >= its
  start, end <= its end); self CPU time is its duration less its children's durations;
- process-group work events (``gloo:*``, ``nccl:*``...) start and end on different threads: torch
  calls them async, gives them no self CPU time and no place in the nesting;
- an op's memory is the sum of the ``[memory]`` records whose time lies in its interval, on any
  thread; records inside no op form the ``[memory]`` row;
- a GPU event's time goes to the CPU op with the same ``External id`` (not to the runtime call);
  CUDA total of an op is its kernels' time plus its children's CUDA total;
- ``ProfilerStep#N`` rows add up as ``ProfilerStep*``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gpuscope.torchtrace.reader import CPU_MEMORY_DEVICES, TorchTrace

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "privateuse1_runtime")
NOT_OPS = ("Trace",)                  # Kineto's own span ("PyTorch Profiler (0)")
FILTERED = {"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
            "profiler::_record_function_enter_new", "profiler::_record_function_exit", "aten::is_leaf",
            "aten::output_nr", "aten::_version"}
ASYNC_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:", "xccl:")
GPUSCOPE_MARKERS = "gpuscope:"       # gpuscope's own clock markers in the traces it records: not ops
SORT_KEYS = {"self_cpu": "self_cpu_us", "cpu_total": "cpu_total_us", "self_cuda": "self_cuda_us",
             "cuda_total": "cuda_total_us"}


@dataclass
class OpRow:
    """One row of the table (times in microseconds, memory in bytes)."""

    name: str
    count: int = 0
    self_cpu_us: float = 0.0
    cpu_total_us: float = 0.0
    self_cuda_us: float = 0.0
    cuda_total_us: float = 0.0
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_cuda_mem: int = 0
    cuda_mem: int = 0
    shapes: str = ""
    device: bool = False         # a GPU event's row (a kernel, a copy), not a CPU op's

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("self_cpu_us", "cpu_total_us", "self_cuda_us", "cuda_total_us"):
            d[key] = round(d[key], 3)
        return d


@dataclass
class OpEvents:
    """The per-event figures of one trace's ops (index: the trace's event rows)."""

    index: np.ndarray        # rows of the trace that are ops
    self_cpu_ns: np.ndarray
    cpu_ns: np.ndarray
    self_cuda_ns: np.ndarray
    cuda_ns: np.ndarray
    cpu_mem: np.ndarray
    self_cpu_mem: np.ndarray
    cuda_mem: np.ndarray
    self_cuda_mem: np.ndarray
    parent: np.ndarray       # position (in index) of the enclosing op, -1 at the top
    device: np.ndarray       # bool: a GPU event
    loose_memory: tuple[int, int, int]    # [memory] records inside no op: count, CPU bytes, device bytes
    kept: np.ndarray         # bool: in the table (torch folds an op into a same-named parent)


def step_name(name: str) -> str:
    """torch's table name of an event (``ProfilerStep#3`` -> ``ProfilerStep*``)."""
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


def op_events(tr: TorchTrace) -> OpEvents:
    """Self/total time and memory of every op event of ``tr``."""
    c = tr.cols
    names = np.array(tr.strings, dtype=object)
    ph_x = c["ph"] == ord("X")
    hidden = [i for i, n in enumerate(tr.strings) if n in FILTERED or n.startswith(GPUSCOPE_MARKERS)]
    filtered = np.isin(c["name"], hidden)
    idx = np.flatnonzero(ph_x & ~filtered & ~tr.is_cat(*NOT_OPS))
    start = c["ts_ns"][idx]
    end = start + np.maximum(c["dur_ns"][idx], 0)
    device = tr.is_cat(*DEVICE_CATS)[idx]
    cat_ann = tr.is_cat("user_annotation")[idx]
    async_ = np.zeros(len(idx), bool)
    if len(idx):
        op_names = names[c["name"][idx]]
        async_ = cat_ann & np.array([n.startswith(ASYNC_PREFIXES) for n in op_names], bool)
    dur = end - start
    cpu_ns = np.where(device, 0, dur)
    parent = _nesting(c["tid"][idx], start, end, ~device & ~async_)
    own_cuda = _kernels_to_ops(tr, idx, device, async_)
    kept = _drop_repeats(c["name"][idx], parent, own_cuda)
    cpu_mem, cuda_mem, loose = _memory(tr, start, end, ~device)
    self_cpu = cpu_ns.copy()
    self_cpu[async_] = 0
    cuda = own_cuda.copy()
    child_cpu_mem = np.zeros_like(cpu_mem)
    child_cuda_mem = np.zeros_like(cuda_mem)
    order = np.lexsort((-end, start))[::-1]   # children after their parents, as the nesting saw them
    for i in order:
        p = parent[i]
        if p >= 0:
            self_cpu[p] -= cpu_ns[i]
            cuda[p] += cuda[i]
            child_cpu_mem[p] += cpu_mem[i]
            child_cuda_mem[p] += cuda_mem[i]
    self_cuda = np.where(device, dur, own_cuda)
    cuda = np.where(device, dur, cuda)
    self_cpu_mem = np.where(async_, 0, cpu_mem - child_cpu_mem)
    self_cuda_mem = np.where(async_, 0, cuda_mem - child_cuda_mem)
    return OpEvents(idx, self_cpu, cpu_ns, self_cuda, cuda, cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem,
                    parent, device, loose, kept)


def _drop_repeats(name: np.ndarray, parent: np.ndarray, own_cuda: np.ndarray) -> np.ndarray:
    """torch's _remove_dup_nodes: an op that is the only child of an op of the same name is folded
    into it (its children and kernels go to the parent; it leaves the table). Changes ``parent`` and
    ``own_cuda`` in place; returns the mask of the events kept."""
    kept = np.ones(len(parent), bool)
    has_parent = parent >= 0
    same = np.zeros(len(parent), bool)
    same[has_parent] = name[has_parent] == name[parent[has_parent]]
    if not same.any():
        return kept
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parent.tolist()):
        if p >= 0:
            children.setdefault(p, []).append(i)
    for i in np.flatnonzero(same).tolist():       # parents before children: start order within a thread
        p = int(parent[i])
        if name[p] != name[i] or len(children.get(p, ())) != 1:
            continue
        kept[i] = False
        moved = children.pop(i, [])
        children[p] = moved
        for ch in moved:
            parent[ch] = p
        own_cuda[p] = own_cuda[i]
        parent[i] = -1
    return kept


def _nesting(tid: np.ndarray, start: np.ndarray, end: np.ndarray, sync: np.ndarray) -> np.ndarray:
    """Each sync CPU event's enclosing event on its thread (torch's _populate_cpu_children)."""
    parent = np.full(len(start), -1, np.int64)
    cand = np.flatnonzero(sync)
    order = cand[np.lexsort((-end[cand], start[cand], tid[cand]))]
    stack: list[int] = []
    last_tid = None
    for i in order.tolist():
        t = tid[i]
        if t != last_tid:
            stack, last_tid = [], t
        s, e = start[i], end[i]
        while stack and (s >= end[stack[-1]] or e > end[stack[-1]]):
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def _kernels_to_ops(tr: TorchTrace, idx: np.ndarray, device: np.ndarray, async_: np.ndarray) -> np.ndarray:
    """Each frontend CPU op's own GPU time: its GPU events (same External id)."""
    own = np.zeros(len(idx), np.int64)
    if not device.any():
        return own
    ext = tr.cols["external_id"][idx]
    dur = tr.cols["dur_ns"][idx]
    frontend = ~device & ~async_ & ~tr.is_cat(*RUNTIME_CATS)[idx] & (ext >= 0)
    by_ext = {int(e): i for i, e in zip(np.flatnonzero(frontend).tolist(), ext[frontend].tolist())}
    for i in np.flatnonzero(device & (ext >= 0)).tolist():
        j = by_ext.get(int(ext[i]))
        if j is not None:
            own[j] += max(int(dur[i]), 0)
    return own


def _memory(tr: TorchTrace, start: np.ndarray, end: np.ndarray,
            cpu: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int]]:
    """Bytes of the [memory] records inside each CPU op's interval (CPU, device) and those in none."""
    c = tr.cols
    mid = tr.string_id("[memory]")
    zero = np.zeros(len(start), np.int64)
    if mid < 0:
        return zero, zero.copy(), (0, 0, 0)
    m = np.flatnonzero(c["name"] == mid)
    order = np.argsort(c["ts_ns"][m], kind="stable")
    ts = c["ts_ns"][m][order]
    nbytes = c["mem_bytes"][m][order]
    on_cpu = np.isin(c["mem_device_type"][m][order], list(CPU_MEMORY_DEVICES))
    cpu_cum = np.concatenate(([0], np.cumsum(np.where(on_cpu, nbytes, 0))))
    dev_cum = np.concatenate(([0], np.cumsum(np.where(on_cpu, 0, nbytes))))
    lo = np.searchsorted(ts, start, "left")
    hi = np.searchsorted(ts, end, "right")
    cpu_mem = np.where(cpu, cpu_cum[hi] - cpu_cum[lo], 0)
    dev_mem = np.where(cpu, dev_cum[hi] - dev_cum[lo], 0)
    covered = np.zeros(len(ts) + 1, np.int64)
    np.add.at(covered, lo[cpu], 1)
    np.add.at(covered, hi[cpu], -1)
    loose = np.cumsum(covered)[:-1] == 0
    return cpu_mem, dev_mem, (int(loose.sum()), int(nbytes[loose & on_cpu].sum()), int(nbytes[loose & ~on_cpu].sum()))


def key_averages(tr: TorchTrace, by_shapes: bool = False, ev: OpEvents | None = None) -> list[OpRow]:
    """The table ``prof.key_averages(group_by_input_shape=by_shapes)`` gives for the same profile,
    in first-seen order (torch's)."""
    ev = ev if ev is not None else op_events(tr)
    c = tr.cols
    rows: dict[tuple[Any, ...], OpRow] = {}
    ann = tr.is_cat("user_annotation", "gpu_user_annotation")[ev.index]
    names = c["name"][ev.index].tolist()
    shapes = c["shapes"][ev.index].tolist()
    order = np.lexsort((ev.index, c["ts_ns"][ev.index]))
    for k in order[ev.kept[order]].tolist():
        name = step_name(tr.strings[names[k]])
        shape = (tr.strings[shapes[k]] if shapes[k] >= 0 else "[]") if by_shapes else ""
        key = (name, bool(ev.device[k]), bool(ann[k]), shape)
        row = rows.get(key)
        if row is None:
            row = rows[key] = OpRow(name, shapes=shape, device=bool(ev.device[k]))
        row.count += 1
        row.self_cpu_us += ev.self_cpu_ns[k] / 1000
        row.cpu_total_us += ev.cpu_ns[k] / 1000
        row.self_cuda_us += ev.self_cuda_ns[k] / 1000
        row.cuda_total_us += ev.cuda_ns[k] / 1000
        row.self_cpu_mem += int(ev.self_cpu_mem[k])
        row.cpu_mem += int(ev.cpu_mem[k])
        row.self_cuda_mem += int(ev.self_cuda_mem[k])
        row.cuda_mem += int(ev.cuda_mem[k])
    out = list(rows.values())
    n, cpu_b, dev_b = ev.loose_memory
    if n:
        out.append(OpRow("[memory]", n, self_cpu_mem=cpu_b, cpu_mem=cpu_b, self_cuda_mem=dev_b, cuda_mem=dev_b,
                         shapes="[]" if by_shapes else ""))
    return out


def sort_rows(rows: list[OpRow], sort: str = "self_cpu") -> list[OpRow]:
    """Rows by ``sort`` (self_cpu, cpu_total, self_cuda, cuda_total), largest first."""
    attr = SORT_KEYS.get(sort)
    if attr is None:
        from gpuscope.errors import UserError
        raise UserError(f"--sort {sort!r}: choose one of {', '.join(SORT_KEYS)}")
    return sorted(rows, key=lambda r: getattr(r, attr), reverse=True)
