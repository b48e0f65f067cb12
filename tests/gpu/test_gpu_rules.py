"""The GPU findings, each with a trigger and clean cases, on SYNTHETIC exports of the real schemas.

The acceptance case runs the real CLI: a real ``gpuscope run`` makes the run folder, the synthetic
export goes where nsys would have left its report, and ``gpuscope findings RUN --json`` reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gpuscope.findings import gpu_rules
from gpuscope.gpu import checks
from gpuscope.nsys.report import load_report
from tests.gpu import synthetic_export as sx
from tests.gpu.test_sharing import US, sliced


def _gpuscope(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def _run_with_export(tmp_path, export) -> tuple[str, dict]:
    """A real run in a fresh store, whose folder then holds ``export`` as its nsys report."""
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path / "home")}
    script = tmp_path / "tiny.py"
    script.write_text("print('tiny')\n")
    proc = _gpuscope("run", "--json", "--quiet", str(script), env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.copy(export, os.path.join(summary["run_dir"], "report.sqlite"))
    return summary["run_id"], env


def _overlapping(tmp_path, version="2024.2"):
    """A [0,10) [20,30) and B [5,15) [25,35) µs on device 0: they overlap half of each kernel."""
    ks = [sx.Kernel(101, 0, a * US, b * US, a * US) for a, b in ((0, 10), (20, 30), (40, 50))]
    ks += [sx.Kernel(202, 0, a * US, b * US, a * US) for a, b in ((5, 15), (25, 35), (45, 55))]
    return sx.write(tmp_path / "overlap.sqlite", sx.Export(kernels=ks), version)


def test_gpuscope_findings_lists_time_sliced_for_device_0_only(tmp_path):
    run_id, env = _run_with_export(tmp_path, sliced("2024.2", tmp_path))
    proc = _gpuscope("findings", run_id, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    found = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "gpu-time-sliced"]
    assert len(found) == 1
    f = found[0]
    assert f["evidence"]["numbers"]["device"] == 0 and f["pids"] == [101, 202]
    assert f["title"].startswith("GPU 0 took turns between 2 processes")
    assert f["evidence"]["numbers"]["switches"] == 4 and f["evidence"]["numbers"]["concurrent ms"] == 0
    assert "MPS" in f["fix"]


def test_overlapping_processes_get_no_time_sliced_finding(tmp_path):
    run_id, env = _run_with_export(tmp_path, _overlapping(tmp_path))
    proc = _gpuscope("findings", run_id, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    codes = [f["code"] for f in json.loads(proc.stdout)["findings"]]
    assert "gpu-time-sliced" not in codes and "rule-failed" not in codes


@pytest.mark.parametrize("version", list(sx.VERSIONS))
def test_time_sliced_on_every_schema_and_not_for_one_after_the_other(version, tmp_path):
    tl = load_report(sliced(version, tmp_path), use_cache=False).timeline
    asked = []
    found = gpu_rules.time_sliced_findings(tl, {101: "rank 0", 202: "rank 1"}, lambda: asked.append(1) or "MPS is off")
    assert [f.evidence.number("device") for f in found] == [0]
    assert "rank 0 101" in found[0].title and "now on this machine: MPS is off" in found[0].evidence.excerpts
    # A runs, then B runs: one switch, no turns taken
    seq = sx.Export(kernels=[sx.Kernel(1, 0, 0, 10 * US), sx.Kernel(1, 0, 12 * US, 20 * US),
                             sx.Kernel(2, 0, 30 * US, 40 * US), sx.Kernel(2, 0, 42 * US, 50 * US)])
    tl = load_report(sx.write(tmp_path / "seq.sqlite", seq, version), use_cache=False).timeline
    assert gpu_rules.time_sliced_findings(tl, {}, lambda: asked.append(1) or "MPS is off") == []
    assert asked == [1]      # MPS was looked at for the finding only


def _stream(pid: int, n: int, length: int, gap: int, queued: bool, t0: int = 0) -> list[sx.Kernel]:
    """``n`` kernels of ``length`` ns, ``gap`` ns apart; launched long before (``queued``) or just
    before each starts, after the previous one ended (the launch-bound pattern)."""
    out = []
    for i in range(n):
        start = t0 + i * (length + gap)
        launch = t0 if queued else start - min(gap, 3 * US) // 2
        out.append(sx.Kernel(pid, 0, start, start + length, max(launch, 0)))
    return out


def test_launch_bound_trigger_and_clean_cases(tmp_path):
    def found(kernels, name):
        tl = load_report(sx.write(tmp_path / f"{name}.sqlite", sx.Export(kernels=kernels), "2024.2"),
                         use_cache=False).timeline
        return gpu_rules.launch_bound_findings(tl, {7: "main"})

    # 300 kernels of 2 µs, 10 µs apart, each launched after the previous ended: waits dominate
    hit = found(_stream(7, 300, 2 * US, 10 * US, queued=False), "bound")
    assert len(hit) == 1 and hit[0].pids == (7,)
    assert hit[0].evidence.number("items") == 300 and hit[0].evidence.number("median item µs") == 2.0
    assert hit[0].evidence.number("waiting for launches ms") == pytest.approx(299 * 10 / 1e3)
    # the same kernels back to back from a full queue: the GPU never waited
    assert found(_stream(7, 300, 2 * US, 0, queued=True), "full") == []
    # same gaps, but the kernels were queued long before: the gaps are not launch waits
    assert found(_stream(7, 300, 2 * US, 10 * US, queued=True), "queued") == []
    # long pauses between kernels (the program did other things): not launch-bound
    assert found(_stream(7, 300, 2 * US, 5_000 * US, queued=False), "pauses") == []
    # too few kernels to say
    assert found(_stream(7, 50, 2 * US, 10 * US, queued=False), "few") == []


def test_pageable_copies_trigger_and_clean_cases():
    n = 20
    start = np.arange(n, dtype=np.int64) * 1_000_000
    end = start + 50_000
    pid = np.full(n, 5, np.int64)
    dev = np.zeros(n, np.int64)
    kind = np.full(n, checks.HTOD)
    nbytes = np.full(n, 1 << 20)
    span = {5: (0, int(end[-1]))}
    pageable = np.full(n, checks.PAGEABLE)
    (hit,) = checks.pageable_copies(start, end, pid, dev, kind, pageable, nbytes, span)
    assert (hit.pid, hit.device, hit.copies, hit.nbytes, hit.copy_ns) == (5, 0, 20, 20 << 20, 20 * 50_000)
    pinned = np.full(n, sx.PINNED)
    assert checks.pageable_copies(start, end, pid, dev, kind, pinned, nbytes, span) == []
    dtoh = np.full(n, sx.DTOH)
    assert checks.pageable_copies(start, end, pid, dev, dtoh, pageable, nbytes, span) == []
    # all at the start of a long GPU activity: a one-off load, not the step loop
    assert checks.pageable_copies(start // 100, end // 100, pid, dev, kind, pageable, nbytes, {5: (0, 10**9)}) == []
    assert checks.pageable_copies(start[:5], end[:5], pid[:5], dev[:5], kind[:5], pageable[:5], nbytes[:5],
                                  span) == []


@pytest.mark.parametrize("version", list(sx.VERSIONS))
def test_pageable_rule_through_the_export(tmp_path, version):
    copies = [sx.Copy(5, 0, i * 1_000 * US, i * 1_000 * US + 50 * US, src=sx.PAGEABLE, launch=i * 1_000 * US)
              for i in range(20)]
    tl = load_report(sx.write(tmp_path / "p.sqlite", sx.Export(copies=copies), version), use_cache=False).timeline
    (f,) = gpu_rules.pageable_findings(tl, {})
    assert f.code == "pageable-copies" and f.evidence.number("copies") == 20
    pinned = [sx.Copy(c.pid, c.device, c.start, c.end, launch=c.launch) for c in copies]
    tl = load_report(sx.write(tmp_path / "q.sqlite", sx.Export(copies=pinned), version), use_cache=False).timeline
    assert gpu_rules.pageable_findings(tl, {}) == []


def test_rules_skip_an_export_without_gpu_tables(tmp_path):
    from gpuscope.findings.registry import RunInputs

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run = RunInputs(str(run_dir))
    assert not gpu_rules._has_export(run)                      # no export at all
    sx.write(run_dir / "report.sqlite", sx.Export(), "2024.2")
    assert gpu_rules._has_export(run)                          # the synthetic export has the CUPTI tables
    import sqlite3

    conn = sqlite3.connect(run_dir / "report.sqlite")
    for table in gpu_rules.GPU_TABLES:
        conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()
    assert not gpu_rules._has_export(run)                      # a CPU-only recording
