"""Rules on the CUDA trace of a run recorded with nsys: GPUs that take turns between processes,
processes that keep the GPU waiting for launches, and copies from pageable memory in a loop.

The detection is :mod:`gpuscope.gpu.checks` (thresholds and their meaning: docs/GPU-SHARING.md);
here each hit becomes a :class:`~gpuscope.finding.Finding` with its evidence and fix. The three
rules read one Timeline of the run's export, loaded once.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from gpuscope.finding import Finding, Severity, evidence
from gpuscope.findings.registry import Input, RunInputs, rule

if TYPE_CHECKING:
    from gpuscope.trace.timeline import Timeline

TIME_SLICED_FIX = (
    "the GPU runs one process's CUDA context at a time: while one process's kernels run, the others' wait. "
    "Serve the work from one process that batches requests (or runs them on several CUDA streams): its kernels "
    "fill the GPU without context switches. Or start NVIDIA MPS (`nvidia-cuda-mps-control -d`, as the GPU's "
    "owner; compute mode exclusive-process is the usual setting): the processes' kernels then run at once in one "
    "shared context, each limited by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE if set; memory is not isolated and a "
    "fault in one client stops the others' work")
LAUNCH_BOUND_FIX = (
    "the GPU finishes each kernel before the next is launched: launch fewer, larger kernels. Capture the step "
    "in a CUDA graph (torch.cuda.graphs, or torch.compile(mode=\"reduce-overhead\")), fuse small operations "
    "(torch.compile), raise the batch size, and keep host work (.item(), .cpu(), prints) out of the step loop")
PAGEABLE_FIX = (
    "copies from pageable host memory go through a staging buffer and block the host thread, so they cannot "
    "overlap compute: allocate the source in pinned memory (DataLoader(pin_memory=True), tensor.pin_memory(), "
    "torch.empty(..., pin_memory=True)) and copy with .to(device, non_blocking=True). Pinned memory is locked "
    "RAM: pin buffers you reuse, not every tensor")


GPU_TABLES = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"}


def _has_export(run: RunInputs) -> bool:
    """The run has an nsys export that may hold GPU work (a CPU-only export's tables say it has none)."""
    path = run.export
    if path is None:
        return False
    if not path.endswith(".sqlite"):
        return True          # a .nsys-rep: only its export can tell
    from gpuscope.errors import UserError
    from gpuscope.nsys.reader import export_info, open_export

    try:
        conn = open_export(path)
    except UserError:
        return True          # the check then says what is wrong with it
    try:
        return bool(export_info(conn).tables & GPU_TABLES)
    finally:
        conn.close()


@lru_cache(maxsize=2)
def _timeline(path: str, size: int, mtime_ns: int) -> Timeline:
    from gpuscope.nsys.report import load_report

    return load_report(path).timeline


def timeline_of(run: RunInputs) -> Timeline | None:
    """The Timeline of the run's nsys export (read once for the three rules), or None."""
    path = run.export
    if path is None:
        return None
    st = os.stat(path)
    return _timeline(path, st.st_size, st.st_mtime_ns)


def _who(pid: int, roles: dict[int, str]) -> str:
    return f"{roles[pid]} {pid}" if pid in roles else f"pid {pid}"


def time_sliced_findings(tl: Timeline, roles: dict[int, str],
                         mps_line: Callable[[], str | None] | None = None) -> list[Finding]:
    """``mps_line``: what MPS looks like now, asked only when there is a finding to add it to."""
    from gpuscope.gpu import checks, sharing

    out = []
    hits = checks.time_sliced(sharing.of_timeline(tl))
    mps_now = mps_line() if hits and mps_line is not None else None
    for hit in hits:
        d = hit.sharing
        who = ", ".join(_who(p, roles) for p in hit.pids[:4]) + (" …" if len(hit.pids) > 4 else "")
        numbers = {"device": d.device, "processes": len(hit.pids), "busy ms": d.busy_ns / 1e6,
                   "concurrent ms": d.concurrent_ns / 1e6, "switches": d.switches}
        if d.switch_ns is not None:
            numbers["switch cost ms"] = d.switch_ns / 1e6
        excerpts = [f"{_who(p.pid, roles)}: GPU {p.gpu_ns / 1e6:.3f} ms ({p.share:.0%} of busy)"
                    + (f", queued behind others {p.queued_ns / 1e6:.3f} ms" if p.queued_ns is not None else "")
                    for p in d.processes if p.pid in hit.pids]
        if mps_now:
            excerpts.append(f"now on this machine: {mps_now}")
        out.append(Finding(
            "gpu-time-sliced",
            f"GPU {d.device} took turns between {len(hit.pids)} processes ({who}): their work overlapped "
            f"{hit.overlap:.1%} of the time, with {d.switches} switches between them",
            TIME_SLICED_FIX, Severity.WARNING, hit.pids, evidence(numbers, excerpts, hit.pids)))
    return out


def launch_bound_findings(tl: Timeline, roles: dict[int, str]) -> list[Finding]:
    from gpuscope.gpu import checks, sharing

    out = []
    for hit in checks.launch_bound(sharing.work_of(tl)):
        out.append(Finding(
            "gpu-launch-bound",
            f"{_who(hit.pid, roles)} kept GPU {hit.device} waiting for its next launch "
            f"{hit.gap_ns / 1e6:.3f} ms, longer than its {hit.items} kernels and copies ran "
            f"({hit.gpu_ns / 1e6:.3f} ms; median {hit.median_item_ns / 1e3:.1f} µs each)",
            LAUNCH_BOUND_FIX, Severity.WARNING, (hit.pid,),
            evidence({"device": hit.device, "items": hit.items, "GPU ms": hit.gpu_ns / 1e6,
                      "waiting for launches ms": hit.gap_ns / 1e6, "median item µs": hit.median_item_ns / 1e3},
                     (), [hit.pid])))
    return out


def pageable_findings(tl: Timeline, roles: dict[int, str]) -> list[Finding]:
    from gpuscope.gpu import checks, sharing

    m = tl.memops
    if not len(m):
        return []
    spans = checks.work_spans(sharing.work_of(tl))
    out = []
    for hit in checks.pageable_copies(m.start_ns, m.end_ns, m.pid, m.device, m.copy_kind, m.src_kind, m.bytes,
                                      spans):
        out.append(Finding(
            "pageable-copies",
            f"{_who(hit.pid, roles)} copied from pageable host memory to GPU {hit.device} {hit.copies} times "
            f"({hit.nbytes / 2**20:.1f} MiB, {hit.copy_ns / 1e6:.3f} ms of copies) throughout its GPU work",
            PAGEABLE_FIX, Severity.WARNING, (hit.pid,),
            evidence({"copies": hit.copies, "MiB": hit.nbytes / 2**20, "copy ms": hit.copy_ns / 1e6,
                      "spread": round(hit.spread, 3)}, (), [hit.pid])))
    return out


def _mps_line() -> str | None:
    from gpuscope.gpu import mps

    try:
        return mps.detect().describe()
    except OSError:
        return None


@rule("gpu-time-sliced", inputs={Input.NSYS, Input.EVENTS}, applies=_has_export,
      title="processes on one GPU took turns: their work almost never ran at once")
def _gpu_time_sliced(run: RunInputs) -> list[Finding]:
    tl = timeline_of(run)
    return time_sliced_findings(tl, run.roles, _mps_line) if tl is not None else []


@rule("gpu-launch-bound", inputs={Input.NSYS, Input.EVENTS}, applies=_has_export,
      title="a process kept its GPU waiting for launches longer than its kernels ran")
def _gpu_launch_bound(run: RunInputs) -> list[Finding]:
    tl = timeline_of(run)
    return launch_bound_findings(tl, run.roles) if tl is not None else []


@rule("pageable-copies", inputs={Input.NSYS, Input.EVENTS}, applies=_has_export,
      title="host-to-device copies from pageable memory, again and again")
def _pageable_copies(run: RunInputs) -> list[Finding]:
    tl = timeline_of(run)
    return pageable_findings(tl, run.roles) if tl is not None else []
