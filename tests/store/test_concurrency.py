"""Concurrent runs (issue 15.6): distinct ids in the same second, and no sample lost in the WAL store."""

from __future__ import annotations

import sqlite3
import subprocess
import textwrap
import time
from collections import Counter
from contextlib import closing

from gpuscope import rundir as layout
from tests.store.util import PY, history, write_script

# Each process imports, says it is ready, waits for the go file, then takes a run id (reserving its folder).
RESERVE = textwrap.dedent("""
    import os, sys, time
    from gpuscope import rundir as layout
    gate = sys.argv[1]
    open(os.path.join(gate, f"ready-{os.getpid()}"), "w").close()
    while not os.path.exists(os.path.join(gate, "go")):
        time.sleep(0.001)
    run_id, path = layout.reserve_run_dir()
    print(run_id)
""")

# One process = one sampler of one run: BATCHES batches of PROCS processes each, flushed one by one.
WRITER = textwrap.dedent("""
    import sys, time
    from types import SimpleNamespace as NS
    from gpuscope.telemetry.storewriter import StoreWriter
    run_id, batches, procs, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    time.sleep(max(0.0, start - time.time()))
    w = StoreWriter(None, run_id, interval_s=0.01, flush_s=0.0)
    for i in range(batches):
        host = NS(cpu=1.0, mem_used=1, mem_total=2, swap_used=0, swap_total=0, cores=(1.0, 2.0))
        ps = tuple(NS(pid=1000 + p, state="R", cpu=1.0, rss=i, uss=None, threads=1, gpu_mem=None, sm_util=None)
                   for p in range(procs))
        w(NS(t_ns=10**9 + i * 10**6, host=host, processes=ps, devices=(), gpu_processes=(), notes=()))
    w.close()
    print(w.rows_written, w.flushes)
""")


def test_ids_taken_in_the_same_second_are_distinct(gpuscope_home, run_env, tmp_path):
    procs = [subprocess.Popen([PY, "-c", RESERVE, str(tmp_path)], env=run_env, stdout=subprocess.PIPE, text=True)
             for _ in range(10)]
    try:
        deadline = time.monotonic() + 240
        while len(list(tmp_path.glob("ready-*"))) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        (tmp_path / "go").touch()
        ids = [p.communicate(timeout=60)[0].strip() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs)
    assert len(set(ids)) == 10
    seconds = Counter(i.rsplit("-", 1)[0] for i in ids)
    assert max(seconds.values()) >= 2, seconds          # the test is about ids taken in one second
    assert sorted(p.name for p in (gpuscope_home / "runs").iterdir()) == sorted(ids)


def test_a_taken_id_is_drawn_again(gpuscope_home, monkeypatch):
    drawn = iter(["20261130-120000-00000000", "20261130-120000-00000000", "20261130-120000-00000001"])
    monkeypatch.setattr(layout, "_candidate_id", lambda: next(drawn))
    first = layout.new_run_id()
    second = layout.new_run_id()
    assert (first, second) == ("20261130-120000-00000000", "20261130-120000-00000001")
    assert (layout.create_run_dir(second) / layout.EVENTS).is_dir()


def test_ten_runs_started_together_all_succeed(gpuscope_home, run_env, tmp_path):
    script = write_script(tmp_path, "quick.py", "import time; time.sleep(0.5); print('ok')\n")
    procs = [subprocess.Popen([PY, "-m", "gpuscope", "run", "--interval", "0.05", str(script)], env=run_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(10)]
    outs = [p.communicate(timeout=280) for p in procs]
    assert [p.returncode for p in procs] == [0] * 10, [err[-600:] for _out, err in outs]
    assert all("not stored" not in err for _out, err in outs), outs
    _, rows = history(run_env)
    assert len(rows) == 10 and len({r["id"] for r in rows}) == 10
    assert {r["status"] for r in rows} == {"exited"}
    with closing(sqlite3.connect(gpuscope_home / "gpuscope.sqlite")) as conn:
        counts = conn.execute("SELECT s.run_id, count(h.t_ns) FROM sample_series s LEFT JOIN sample_host h"
                              " ON h.series = s.key GROUP BY s.run_id").fetchall()
    assert len(counts) == 10 and all(n > 0 for _run, n in counts), counts


def test_eight_samplers_writing_at_once_lose_nothing(gpuscope_home, run_env):
    batches, nprocs = 150, 6
    start = time.time() + 20.0     # all importing done (the machine is shared), then all write at once
    procs = [subprocess.Popen([PY, "-c", WRITER, f"run-{i}", str(batches), str(nprocs), str(start)], env=run_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(8)]
    outs = [p.communicate(timeout=280) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    assert all("not stored" not in err for _out, err in outs), outs
    assert all(out.split() == [str(batches * (1 + nprocs)), str(batches)] for out, _ in outs), outs
    with closing(sqlite3.connect(gpuscope_home / "gpuscope.sqlite")) as conn:
        rows = conn.execute("SELECT s.run_id, (SELECT count(*) FROM sample_host h WHERE h.series=s.key),"
                            " (SELECT count(*) FROM sample_proc p WHERE p.series=s.key) FROM sample_series s")
        per_run = {r[0]: (r[1], r[2]) for r in rows}
    assert per_run == {f"run-{i}": (batches, batches * nprocs) for i in range(8)}
