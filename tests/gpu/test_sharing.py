"""Who ran when on each GPU: figures on SYNTHETIC exports of the real schemas, computed by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuscope.gpu import sharing, sharing_report
from gpuscope.nsys.report import load_report
from tests.gpu import synthetic_export as sx

US = 1_000   # ns


def sliced(version: str, tmp_path, launches: bool = True):
    """Device 0: A (pid 101) and B (pid 202) take turns, never overlapping; device 1: C (303) alone.

    A: [0,10) [24,34) [48,58)   B: [12,22) [36,46)   (µs) -> busy 50, concurrent 0, switches 4
    B's kernels were launched at 5 and 20, so they waited behind A from 5 to 10 and 24 to 34 (15 µs),
    and the switches A->B cost 12-10 and 36-34 (B was ready, the GPU idle): 4 µs.
    C: [0,30) [40,50) -> busy 40, no switch.
    """
    def k(pid, dev, a, b, launch=None):
        return sx.Kernel(pid, dev, a * US, b * US, launch * US if (launches and launch is not None) else None)

    ex = sx.Export(kernels=[k(101, 0, 0, 10), k(202, 0, 12, 22, 5), k(101, 0, 24, 34), k(202, 0, 36, 46, 20),
                            k(101, 0, 48, 58), k(303, 1, 0, 30, 0), k(303, 1, 40, 50, 38)])
    return sx.write(tmp_path / f"sliced-{version}.sqlite", ex, version)


@pytest.mark.parametrize("version", list(sx.VERSIONS))
def test_time_sliced_export_gives_the_hand_computed_figures(version, tmp_path):
    got = sharing_report.report_json(load_report(sliced(version, tmp_path), use_cache=False))
    assert [d["device"] for d in got] == [0, 1]
    d0, d1 = got
    assert (d0["busy_s"], d0["concurrent_s"], d0["switches"], d0["switch_s"]) == (50e-6, 0.0, 4, 4e-6)
    assert d0["span_s"] == 58e-6
    a, b = d0["processes"]
    assert (a["pid"], a["gpu_s"], a["share"], a["queued_s"]) == (101, 30e-6, 0.6, None)   # A: no API rows
    assert (b["pid"], b["gpu_s"], b["share"], b["queued_s"]) == (202, 20e-6, 0.4, 15e-6)
    assert (d1["busy_s"], d1["concurrent_s"], d1["switches"], d1["switch_s"]) == (40e-6, 0.0, 0, 0.0)
    assert [(p["pid"], p["gpu_s"], p["share"], p["queued_s"]) for p in d1["processes"]] == [(303, 40e-6, 1.0, 0.0)]


def test_without_launch_times_switch_and_queued_time_are_unknown(tmp_path):
    got = sharing_report.report_json(load_report(sliced("2024.2", tmp_path, launches=False), use_cache=False))
    assert got[0]["switches"] == 4 and got[0]["switch_s"] is None
    assert all(p["queued_s"] is None for d in got for p in d["processes"])


@pytest.mark.parametrize("version", ["2022.4", "2024.2"])
def test_overlapping_processes_and_copies(version, tmp_path):
    """A [0,10) and B [5,15) overlap 5 µs; A's memcpy [20,26) and B's memset [24,30) overlap 2 µs.

    busy = 15 + 10 = 25, concurrent = 5 + 2 = 7; sole stretches A [0,5), B [10,15), A [20,24),
    B [26,30): 3 switches. A->B and A->B again are handed over while both ran (no cost); B->A: the
    GPU idled from 15, A's copy was launched at 19 (its own launch-to-start floor is 0: its kernel
    started at its launch) and started at 20: 1 µs.
    """
    ex = sx.Export(kernels=[sx.Kernel(1, 0, 0, 10 * US, 0), sx.Kernel(2, 0, 5 * US, 15 * US, 0)],
                   copies=[sx.Copy(1, 0, 20 * US, 26 * US, launch=19 * US),
                           sx.Copy(2, 0, 24 * US, 30 * US, memset=True, launch=19 * US)])
    d = sharing_report.report_json(load_report(sx.write(tmp_path / "o.sqlite", ex, version), use_cache=False))[0]
    assert (d["busy_s"], d["concurrent_s"], d["switches"], d["switch_s"]) == (25e-6, 7e-6, 3, 1e-6)
    assert [(p["pid"], p["gpu_s"], p["items"]) for p in d["processes"]] == [(1, 16e-6, 2), (2, 16e-6, 2)]
    # B's kernel: launched at 0, started at 5; A alone ran 0..5 -> 5. B's memset: 19..24, A alone 20..24 -> 4.
    # A's memcpy: launched 19, started 20, nothing else ran -> 0.
    assert [p["queued_s"] for p in d["processes"]] == [0.0, 9e-6]


def test_lanes_say_whose_work_was_on_each_gpu(tmp_path):
    tl = load_report(sliced("2023.4", tmp_path), use_cache=False).timeline
    lanes = {lane.device: lane for lane in sharing.device_lanes(tl)}
    d0 = lanes[0]
    assert list(zip((d0.start // US).tolist(), (d0.end // US).tolist(), d0.pid.tolist())) == [
        (0, 10, 101), (12, 22, 202), (24, 34, 101), (36, 46, 202), (48, 58, 101)]
    w = sharing.Work(*(np.array(v, dtype=np.int64) for v in ([0, 5], [10, 15], [1, 2], [0, 0], [-1, -1])))
    (lane,) = sharing.lanes(w)
    assert list(zip(lane.start.tolist(), lane.end.tolist(), lane.pid.tolist())) == [(0, 5, 1), (5, 10, -1), (10, 15, 2)]


def _by_hand(work: sharing.Work) -> dict[int, dict]:
    """The figures by walking every nanosecond (small integer intervals only)."""
    out = {}
    for dev in sorted(set(work.device.tolist())):
        sel = work.device == dev
        s, e, p, la = work.start[sel], work.end[sel], work.pid[sel], work.launch[sel]
        top = int(e.max())
        active = [set(p[(s <= t) & (t < e)].tolist()) for t in range(top)]
        busy = sum(1 for a in active if a)
        conc = sum(1 for a in active if len(a) >= 2)
        owners = [next(iter(a)) for a in active if len(a) == 1]
        switches = sum(1 for x, y in itertools.pairwise(owners) if x != y)
        procs = {}
        for pid in sorted(set(p.tolist())):
            mine = p == pid
            gpu = sum(1 for a in active if pid in a)
            waiting: set[int] = set()
            for a, b in zip(la[mine].tolist(), s[mine].tolist()):
                if a >= 0:
                    waiting.update(range(a, b))
            queued = sum(1 for t in waiting if t < top and bool(active[t]) and pid not in active[t])
            procs[pid] = (gpu, queued)
        out[dev] = {"busy": busy, "concurrent": conc, "switches": switches, "procs": procs}
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_intervals_agree_with_a_walk_over_every_nanosecond(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    start = rng.integers(0, 300, n)
    work = sharing.Work(start=start, end=start + rng.integers(0, 40, n), pid=rng.integers(1, 5, n),
                        device=rng.integers(0, 3, n), launch=np.maximum(start - rng.integers(0, 30, n), 0))
    ref = _by_hand(work)
    got = {d.device: d for d in sharing.analyse(work)}
    assert set(got) == set(ref)
    for dev, r in ref.items():
        d = got[dev]
        assert (d.busy_ns, d.concurrent_ns, d.switches) == (r["busy"], r["concurrent"], r["switches"])
        assert {p.pid: (p.gpu_ns, p.queued_ns) for p in d.processes} == r["procs"]


def test_no_gpu_work_gives_an_empty_list(tmp_path):
    assert sharing_report.report_json(load_report(sx.write(tmp_path / "e.sqlite", sx.Export(), "2024.2"),
                                           use_cache=False)) == []
    assert sharing.analyse(sharing.Work(*(np.zeros(0, np.int64) for _ in range(5)))) == []


@pytest.mark.parametrize("seed", range(4))
def test_the_launch_floor_from_the_smallest_delays_equals_the_one_from_every_item(seed, monkeypatch):
    """Thousands of items: the floor found among the 64 smallest delays gives the same switch cost
    as looking at every item."""
    rng = np.random.default_rng(seed)
    n = 3000
    dur = rng.integers(1, 50, n)
    start = np.cumsum(dur + rng.integers(0, 20, n)) - dur
    pid = np.repeat(rng.integers(1, 4, n // 10 + 1), 10)[:n]
    work = sharing.Work(start=start, end=start + dur, pid=pid, device=np.zeros(n, np.int64),
                        launch=np.maximum(start - rng.integers(0, 200, n), 0))
    fast = sharing.analyse(work)
    monkeypatch.setattr(sharing, "_FLOOR_CANDIDATES", 10**9)
    assert sharing.analyse(work) == fast
    assert fast[0].switch_ns is not None and fast[0].switches > 100


def test_a_kernel_that_ends_before_it_starts_counts_as_an_instant(tmp_path):
    ex = sx.Export(kernels=[sx.Kernel(1, 0, 0, 10 * US), sx.Kernel(2, 0, 30 * US, 20 * US)])
    d = sharing_report.report_json(load_report(sx.write(tmp_path / "bad.sqlite", ex, "2024.2"), use_cache=False))[0]
    assert (d["busy_s"], d["concurrent_s"]) == (10e-6, 0.0)
    assert {p["pid"]: p["gpu_s"] for p in d["processes"]} == {1: 10e-6, 2: 0.0}


def test_a_job_across_nodes_keeps_each_nodes_gpus_apart(tmp_path):
    """GPU 0 of node 0 and GPU 0 of node 1 are two devices (a merged job Timeline's ``groups``)."""
    from gpuscope.views import timeline_lod as L

    ex = sx.Export(kernels=[sx.Kernel(1, 0, 0, 10 * US), sx.Kernel(2, 0, 5 * US, 15 * US)])
    tl = load_report(sx.write(tmp_path / "job.sqlite", ex, "2024.2"), use_cache=False).timeline
    tl.groups = {1: "node 0 · a", 2: "node 1 · b"}
    rows = sharing_report.to_json(sharing.of_timeline(tl), {}, tl)
    assert [(d["node"], d["device"], d["busy_s"], d["concurrent_s"]) for d in rows] == [
        ("node 0 · a", 0, 10e-6, 0.0), ("node 1 · b", 0, 10e-6, 0.0)]
    assert any("node 1 · b GPU 0" in line for line in sharing_report.text_lines(rows))
    block = L.gpu_share_block(tl)
    assert block is not None and [ln.label for ln in block.lanes] == ["node 0 · a GPU 0: who ran",
                                                                      "node 1 · b GPU 0: who ran"]


@pytest.mark.parametrize("seed", range(3))
def test_damaged_values_give_figures_not_exceptions(seed):
    """Extreme times, devices and pids (a damaged export): the analysis runs to its end."""
    rng = np.random.default_rng(seed)
    n = 200
    big = np.iinfo(np.int64).max // 4
    start = rng.integers(-big, big, n)
    work = sharing.Work(start=start, end=start + rng.integers(0, 10**6, n), pid=rng.integers(0, 1 << 24, n),
                        device=rng.integers(-5, 1 << 40, n), launch=rng.integers(-big, big, n))
    found = sharing.analyse(work)
    assert sum(len(d.processes) for d in found) == len(set(zip(work.device.tolist(), work.pid.tolist())))
    assert len(sharing.lanes(work)) == len(found)
    assert sharing_report.to_json(found)
