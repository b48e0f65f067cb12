"""CUDA summaries against real `nsys stats`, on real exports with CUDA rows added.

This machine has no GPU, so no recording has CUDA activity. The test takes a real ``--lazy=false``
export of each version (it holds the CUPTI tables, empty, with that version's exact columns —
``greenContextId`` mid-table from 2023.4 on), inserts kernel, memcpy, memset and API rows through
the real column names, and compares our summaries with that version's own `nsys stats` reports
(gpukernsum/cuda_gpu_kern_sum, cudaapisum/cuda_api_sum, gpumemtimesum/cuda_gpu_mem_time_sum).
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from gpuscope.nsys import report as nsys_report
from nsysrec import VERSIONS, run_nsys, stats_csv
from test_real_nsys import _ours, assert_same_rows

pytestmark = pytest.mark.nsys

KERNELS = ["void gemm<float, 128>(float*, float const*)", "elementwise_add", "reduce_sum", "tie_b", "tie_a"]
APIS = ["cudaLaunchKernel_v7000", "cudaMemcpy_v3020", "cudaStreamSynchronize_v3020", "cuLaunchKernel"]


def _insert(conn: sqlite3.Connection, table: str, row: dict) -> None:
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    notnull = {r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[3]}
    full = {c: row.get(c, 0 if c in notnull else None) for c in cols}
    conn.execute(f"INSERT INTO {table} ({', '.join(full)}) VALUES ({', '.join('?' * len(full))})",
                 list(full.values()))


def add_cuda_rows(path, seed: int = 3) -> None:
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    base = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM StringIds").fetchone()[0]
    ids = {}
    for i, name in enumerate(KERNELS + APIS):
        conn.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (base + i, name))
        ids[name] = base + i
    gpid = (1 << 48) | (4242 << 24)
    t = 1_000_000
    for corr in range(1, 121):
        name = KERNELS[corr % len(KERNELS)]
        dur = 1000 if name.startswith("tie") else rng.randint(500, 50_000)
        grid = (64, 1, 1) if corr % 3 else (128, 2, 1)
        _insert(conn, "CUPTI_ACTIVITY_KIND_KERNEL", {
            "start": t, "end": t + dur, "deviceId": corr % 2, "contextId": 1, "streamId": 7 + corr % 3,
            "correlationId": corr, "globalPid": gpid, "demangledName": ids[name], "shortName": ids[name],
            "gridX": grid[0], "gridY": grid[1], "gridZ": grid[2], "blockX": 256, "blockY": 1, "blockZ": 1,
            "registersPerThread": 32, "gridId": corr})
        api = APIS[corr % len(APIS)]
        driver = api.startswith("cu") and not api.startswith("cuda")
        _insert(conn, "CUPTI_ACTIVITY_KIND_RUNTIME", {
            "start": t - 5000, "end": t - 5000 + rng.randint(200, 9000), "eventClass": 1 if driver else 0,
            "globalTid": gpid | 4242, "correlationId": corr, "nameId": ids[api], "returnValue": 0})
        if corr % 4 == 0:
            _insert(conn, "CUPTI_ACTIVITY_KIND_MEMCPY", {
                "start": t + 60_000, "end": t + 60_000 + rng.randint(100, 20_000), "deviceId": 0, "contextId": 1,
                "streamId": 7, "correlationId": 1000 + corr, "globalPid": gpid, "bytes": 4096,
                "copyKind": (1, 2, 8)[corr % 3], "srcKind": 1, "dstKind": 2})
        if corr % 10 == 0:
            _insert(conn, "CUPTI_ACTIVITY_KIND_MEMSET", {
                "start": t + 90_000, "end": t + 90_000 + rng.randint(100, 3000), "deviceId": 0, "contextId": 1,
                "streamId": 8, "correlationId": 2000 + corr, "globalPid": gpid, "value": 0, "bytes": 1024,
                "memKind": 3})
        t += 100_000
    conn.commit()
    conn.close()


@pytest.mark.parametrize("key", VERSIONS)
def test_cuda_summaries_equal_nsys_stats(recordings, installs, key, tmp_path):
    inst = installs[key]
    rep = recordings.get(key, "spawn").with_suffix(".nsys-rep")
    full = tmp_path / "full.sqlite"
    run_nsys([inst.nsys, "export", "--type", "sqlite", "--lazy=false", "-f", "true", "-o", full, rep], cwd=tmp_path)
    add_cuda_rows(full)
    report = nsys_report.load_report(full)
    tl = report.timeline
    assert len(tl.kernels) == 120 and len(tl.cuda_api) == 120 and len(tl.memops) == 42
    copies = tl.memops.kind == 0
    assert copies.sum() == 30 and set(tl.memops.src_kind[copies].tolist()) == {1}
    assert set(tl.memops.dst_kind[copies].tolist()) == {2}
    assert set(tl.memops.src_kind[~copies].tolist()) == {-1} and set(tl.memops.dst_kind[~copies].tolist()) == {3}
    assert 4242 in tl.processes.pid.tolist()

    theirs = stats_csv(inst, full, "cuda_gpu_kern_sum")
    ours = report.summaries["kernel"]
    if inst.generation == 2022:     # gpukernsum: one row per (name, grid, block)
        assert len(ours) == len(theirs) > len(KERNELS)
        keyed = {(r["Name"], r["GridXYZ"], r["BlockXYZ"]): r for r in theirs}
        for row in ours:
            ref = keyed[(row.name, row.grid, row.block)]
            assert int(ref["Instances"]) == row.count
            assert {k: str(v) for k, v in _ours(row).items()} == {k: ref[k] for k in _ours(row)}
        assert [r.total_ns for r in ours] == [int(r["Total Time (ns)"]) for r in theirs]
    else:
        assert_same_rows(ours, theirs, "Name", "Instances")
        # ORDER BY total DESC, instances, name: the two tied kernels come in name order
        names = [r.name for r in ours]
        assert names.index("tie_a") < names.index("tie_b")
        assert [r["Name"] for r in theirs] == names

    assert_same_rows(report.summaries["cuda_api"], stats_csv(inst, full, "cuda_api_sum"), "Name", "Num Calls")
    assert {r.name for r in report.summaries["cuda_api"]} == {"cudaLaunchKernel", "cudaMemcpy",
                                                             "cudaStreamSynchronize", "cuLaunchKernel"}
    mem = stats_csv(inst, full, "cuda_gpu_mem_time_sum")
    assert_same_rows(report.summaries["memop"], mem, "Operation", "Count")
