"""Start-method series (`gpuscope compare --start-methods`, ``runs.series.StartMethodSeries``):
alternated real runs, the acceptance facts of issue 11, a failed repeat, Stop, and bad input."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

from gpuscope.analysis.comparison import compare_recorded, compare_runs
from gpuscope.procs import membership
from gpuscope.procs import read as procread
from gpuscope.runs.series import StartMethodSeries
from gpuscope.spec import RunSpec
from gpuscope.store import db
from gpuscope.store import runs as store_runs
from gpuscope.store.lookup import open_run
from tests.runs.helpers import gpuscope, script, summary


def _last_json(proc):
    return json.loads(proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1])


def test_cli_series_alternates_and_spawn_starts_slower(run_env, tmp_path):
    md = tmp_path / "cmp.md"
    out = gpuscope("compare", "--start-methods", "fork,spawn", "--repeat", "2", "--json", "--markdown", str(md),
                   script("pool_nvtx.py"), env=run_env, timeout=300)
    assert out.returncode == 0, out.stderr.decode()
    data = _last_json(out)
    assert list(data["runs"]) == ["fork", "spawn"] and all(len(v) == 2 for v in data["runs"].values())
    # progress in words, one line per run, alternated
    err = out.stderr.decode()
    assert "run 1 of 4: fork, repeat 1" in err and "run 2 of 4: spawn, repeat 1" in err
    assert "run 3 of 4: fork, repeat 2" in err and "run 4 of 4: spawn, repeat 2" in err
    with db.connect() as conn:     # the same data directory as run_env's (the gpuscope_home fixture)
        rows = sorted(store_runs.list_runs(conn), key=lambda r: r.created_ns)
    assert [r.start_method for r in rows] == ["fork", "spawn", "fork", "spawn"]
    assert {r.id for r in rows if r.start_method == "spawn"} == set(data["runs"]["spawn"])
    metrics = {m["name"]: m for m in data["metrics"]}
    for name in ("wall_s", "child_startup_ms", "first_task_ms", "cpu_s", "peak_rss_bytes"):
        m = metrics[name]
        assert {"name", "unit", "values", "ratio", "beyond_noise"} <= set(m), name
        assert set(m["values"]["fork"]) >= {"median", "min", "max"}, name
    # the acceptance fact: on Linux a spawn child's start-up (a fresh interpreter) is slower than a fork child's
    startup = metrics["child_startup_ms"]["values"]
    assert startup["spawn"]["median"] > startup["fork"]["median"]
    assert startup["fork"]["min"] <= startup["fork"]["median"] <= startup["fork"]["max"]
    rows_ = {r["name"]: r for r in data["ranges"]}
    assert rows_["expensive_op"]["values"]["fork"]["count"] == 3
    assert {"count", "total_ns"} <= set(rows_["expensive_op"]["values"]["spawn"])
    assert data["verdict"]
    # start-up phases of each worker of the representative runs, from the event logs
    phases = {w["label"]: [p[0] for p in w["phases"]] for w in data["startup"]}
    assert phases["fork"][:3] == ["start() called", "process created", "interpreter ready"]
    assert "__main__ re-imported" in phases["spawn"] and "first task received" in phases["spawn"]
    text = md.read_text()
    assert "**Verdict.**" in text and "| Wall time |" in text and "| expensive_op |" in text


def test_same_method_twice_is_no_difference_beyond_noise():
    """An A/A series (fork against fork, alternated): the verdict rests on the spread rule. Eight runs
    a side: were the 16 wall times independent draws of one distribution, their two min-max ranges
    would fail to overlap with probability 2 / C(16, 8) = 1 / 6435; alternation spreads any drift
    of the machine over both sides."""
    series = StartMethodSeries(RunSpec(script=script("compare_steady.py")), ["fork", "fork"], repeat=8)
    assert series.labels == ["fork", "fork 2"]
    groups = series.run()
    comp = compare_runs(groups)
    wall = comp.metric("wall_s")
    assert wall is not None and all(s is not None and s.n == 8 for s in wall.values.values())
    assert not wall.beyond_noise, wall.values
    assert comp.verdict.startswith("No difference beyond noise in wall time"), comp.verdict
    assert not comp.left_out


def test_failed_repeat_is_shown_and_left_out(tmp_path):
    counter = tmp_path / "count"
    spec = RunSpec(script=script("compare_fail_once.py"), args=(str(counter),))
    series = StartMethodSeries(spec, ["fork", "spawn"], repeat=2)
    groups = series.run()
    assert [len(groups["fork"]), len(groups["spawn"])] == [2, 2]
    comp = compare_runs(groups)
    failed = groups["spawn"][0]          # the second run of the series
    assert comp.left_out == {failed: "failed (exit code 3)"}
    assert comp.usable_runs("spawn") == [groups["spawn"][1]]
    wall = comp.metric("wall_s")
    assert wall.values["spawn"].n == 1 and wall.values["fork"].n == 2
    assert any(failed in w and "left out of the medians" in w for w in comp.warnings), comp.warnings
    assert "One run of spawn cannot separate a difference from noise" in comp.verdict
    assert not wall.beyond_noise
    assert comp.to_json()["left_out"] == {failed: "failed (exit code 3)"}


def test_stop_ends_the_series_and_leaves_no_process():
    series = StartMethodSeries(RunSpec(script=script("long_nvtx_pool.py")), ["spawn", "fork"], repeat=3)
    seen: list[tuple[int, int, str, int]] = []
    series.progress = lambda *a: seen.append(a)
    result: dict[str, dict] = {}
    worker = threading.Thread(target=lambda: result.setdefault("groups", series.run()))
    worker.start()
    deadline = time.monotonic() + 60
    pids: set[int] = set()
    while time.monotonic() < deadline:
        run = series.current
        if run is not None and run.pid is not None:
            pids |= set(membership.run_processes(run.pid, run.run_id))
            if len(pids) >= 3:        # main, resource tracker, the workers: the pool runs
                break
        time.sleep(0.05)
    assert len(pids) >= 3
    series.stop()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert result["groups"] == {"spawn": [series.results[0].run_id], "fork": []}
    assert seen == [(1, 6, "spawn", 1)]
    assert series.results[0].status == "stopped" and series.stopped
    assert not [p for p in pids if procread.alive(p)]


def test_recorded_runs_without_logs_or_of_different_scripts(run_env):
    ids = []
    for name, method in (("pool_nvtx.py", "fork"), ("pool_nvtx.py", "spawn"), ("compare_steady.py", "fork")):
        proc = gpuscope("run", "--json", "--quiet", "--start-method", method, script(name), env=run_env)
        ids.append(summary(proc)["run_id"])
    shutil.rmtree(Path(summary(proc)["run_dir"]) / "events")
    out = gpuscope("compare", *ids, "--json", env=run_env)
    assert out.returncode == 0, out.stderr.decode()
    data = _last_json(out)
    assert data["kind"] == "runs" and list(data["runs"]) == ids      # different scripts: one label per run
    warnings = " | ".join(data["warnings"])
    assert "differ in their script" in warnings and "compared anyway" in warnings
    assert f"run {ids[2]} ({ids[2]}) has no event logs" in warnings
    text = gpuscope("compare", *ids, env=run_env)
    assert text.returncode == 0 and b"warning: the runs differ in their script" in text.stdout


def test_bad_series_input_is_one_line(run_env):
    cases = [
        (("--start-methods", "fork", script("pool_nvtx.py")), "at least two methods"),
        (("--start-methods", "fork,bogus", script("pool_nvtx.py")), "unknown start method 'bogus'"),
        (("--start-methods", "fork,spawn", "--repeat", "0", script("pool_nvtx.py")), "--repeat must be between"),
        (("--start-methods", "fork,spawn"), "nothing to run"),
        (("--start-methods", "fork,spawn", "missing.py"), "script not found"),
        (("run-a", "run-b", "--nsys"), "--nsys is an option of a run"),
    ]
    for argv, expected in cases:
        out = gpuscope("compare", *argv, env=run_env)
        err = out.stderr.decode()
        assert out.returncode == 2 and err.count("\n") == 1 and expected in err, (argv, err)
        assert "Traceback" not in err


def test_compare_recorded_groups_repeats_by_method():
    """Recorded runs that differ only by start method, with repeats: grouped by method (the API)."""
    groups = StartMethodSeries(RunSpec(script=script("compare_steady.py")), ["fork", "spawn"], repeat=2).run()
    comp = compare_recorded([*groups["spawn"], *groups["fork"]])
    assert comp.kind == "start methods" and comp.labels == ["spawn", "fork"]
    assert comp.runs == {"spawn": groups["spawn"], "fork": groups["fork"]}
    startup = comp.metric("child_startup_ms")
    assert startup.values["spawn"].median > startup.values["fork"].median


def test_parent_logs_each_child_start():
    """The C line (docs/EVENTS.md): the parent records when Process.start() was called and returned,
    and the child's pid; under every start method the child's own log starts after the call."""
    from gpuscope.runs.supervisor import Run
    from gpuscope.trace.events import read_run_events

    for method in ("fork", "spawn", "forkserver"):
        result = Run(RunSpec(script=script("pool_nvtx.py"), start_method=method)).start().wait()
        assert result.status == "exited", (method, result.error)
        logs = read_run_events(result.run_dir)
        main = next(pe for pe in logs if pe.role == "main")
        workers = {pe.pid: pe for pe in logs if pe.role == "pool worker"}
        assert len(workers) == 2, method
        started = {pid: (t_call, t_ret) for t_call, t_ret, pid, _ in main.children}
        assert set(workers) <= set(started), (method, started)
        for pid, pe in workers.items():
            t_call, t_ret = started[pid]
            assert t_call <= t_ret and t_call <= pe.start_ns, method


class _RunTreeOnGpu:
    """For the FAKE NVML (tests/fakes/fake_nvml.py; there is no GPU here): every live process of the
    series' current run holds 512 MiB on the fake GPU, as CUDA workers would."""

    def __init__(self, series):
        self.series = series

    def items(self):
        run = self.series.current
        if run is None or run.pid is None:
            return []
        return [(pid, 512 << 20) for pid in membership.run_processes(run.pid, run.run_id)]


def test_gpu_figures_per_process_and_contexts_per_gpu(monkeypatch):
    from gpuscope.telemetry import sampler as sampler_mod
    from gpuscope.telemetry.gpu import NvmlBackend
    from tests.fakes.fake_nvml import FakeGpu, FakeNvml

    series = StartMethodSeries(RunSpec(script=script("compare_gpu_pool.py")), ["fork", "spawn"], repeat=1)
    gpu = FakeGpu()
    gpu.processes = _RunTreeOnGpu(series)       # type: ignore[assignment]
    monkeypatch.setattr(sampler_mod, "open_backend", lambda: NvmlBackend(FakeNvml([gpu])))
    comp = compare_runs(series.run())
    mem = comp.metric("gpu_mem_per_process_bytes")
    assert mem is not None and mem.values["fork"].median == mem.values["spawn"].median == 512 << 20
    contexts = comp.metric("cuda_contexts_per_gpu")
    # fork: main and two workers; spawn: and multiprocessing's resource tracker
    assert contexts.values["fork"].median == 3 and contexts.values["spawn"].median == 4
    assert "GPU memory per process" in comp.to_markdown()


def test_ctrl_c_stops_the_cli_series(run_env):
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "compare", "--start-methods", "fork,spawn",
                             "--repeat", "3", "--json", script("long_nvtx_pool.py")], env=run_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        run = None
        while time.monotonic() < deadline and run is None:   # the first run is in the store, running
            with db.connect() as conn:
                run = next(iter(store_runs.list_runs(conn)), None)
            time.sleep(0.1)
        assert run is not None
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    text = err.decode()
    assert "stopping the series" in text and "series stopped after 1 of 6 runs" in text
    assert "nothing to compare" in text and "Traceback" not in text
    with db.connect() as conn:
        runs = store_runs.list_runs(conn)
        assert [r.status for r in runs] == ["stopped"]
    pids = [p.pid for p in open_run(runs[0].id).processes]
    assert len(pids) >= 3 and not [p for p in pids if procread.alive(p)]


def test_uss_shows_what_fork_shares():
    """USS per worker (sampled by the series) against peak RSS per worker: a fork worker's RSS counts
    the 96 MiB it shares with its parent, its USS does not; a spawn worker's 96 MiB are its own."""
    groups = StartMethodSeries(RunSpec(script=script("compare_cow.py")), ["fork", "spawn"], repeat=1).run()
    comp = compare_runs(groups)
    uss, rss = comp.metric("uss_per_worker_bytes"), comp.metric("peak_rss_per_worker_bytes")
    assert uss is not None and rss is not None
    assert rss.values["fork"].median > 96 << 20
    assert uss.values["fork"].median < 48 << 20
    # a spawn worker re-imports the script, so it fills its own 96 MiB: private memory
    assert uss.values["spawn"].median > 96 << 20
