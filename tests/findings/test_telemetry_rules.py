"""Rules on the sampler's batches (``gpuscope/findings/telemetry_rules.py``) and the cgroup's OOM count.

- ``cow-lost``: real fork pools under the real recorder and sampler (USS of the workers): a parent
  holding a big list of Python objects that its fork workers read (trigger), and the same amount
  held in one bytes object (clean: reading it writes no per-object reference counts).
- The GPU rules cannot run for real here (no GPU): they get FAKE sample batches, built from the
  telemetry batch dataclasses (as tests/app/test_live_view.py builds them), clearly named below.
- OOM kills: the counter of cgroup v2 ``memory.events`` and v1 ``memory.oom_control`` files
  (written in tmp_path: the OOM killer is not something a test may trigger on a shared machine),
  and the finding it turns a SIGKILL into.
"""

from __future__ import annotations

import signal

import pytest

from gpuscope.findings import process_rules
from gpuscope.findings.telemetry_rules import MIB, TelemetryWatch
from gpuscope.telemetry.batch import DeviceSample, GpuProcessSample, ProcSample, SampleBatch
from tests.findings.live import SCRIPTS, run_live

# -- copy-on-write: real runs ---------------------------------------------------------------------


def _until_workers_done(found):
    return any(f.code == "cow-lost" for f in found)


def test_cow_lost_when_fork_workers_read_inherited_objects():
    live = run_live(SCRIPTS / "cow_lost.py", timeout_s=240, until=_until_workers_done)
    cow = [f for f in live.final if f.code == "cow-lost"]
    assert cow, [f.line() for f in live.final]
    f = cow[0]
    workers = [p for p in live.result.processes if p.role == "pool worker"]
    assert set(f.pids) <= {p.pid for p in workers} and len(f.pids) >= 1, (f.pids, workers)
    assert f.evidence.number("parent RSS MiB") >= 150
    assert f.evidence.number("max child USS MiB") >= 0.5 * f.evidence.number("parent RSS MiB")
    assert "gc.freeze()" in f.fix and "shared_memory" in f.fix


def test_cow_kept_when_the_inherited_data_is_one_buffer():
    live = run_live(SCRIPTS / "cow_lost.py", args=("bytes",), timeout_s=240)
    assert live.result.status == "exited", live.result.status
    assert not [f for f in live.final if f.code == "cow-lost"], [f.line() for f in live.final]


# -- GPU rules: FAKE batches (no GPU here) ----------------------------------------------------------

MAIN, W1, W2, HELPER = 100, 101, 102, 103


TRACKER = 104


def fake_gpu_batch(t_s: float, *, util: float, worker_cpu: float, main_sm: float | None = 50.0,
                   helper_mem: int | None = None, helper_sm: float | None = 0.0) -> SampleBatch:
    """A FAKE tick of a GPU job: main (pid 100) on GPU 0 with two DataLoader-like children and an
    idle resource tracker child."""
    t_ns = int(t_s * 1e9)
    procs = [ProcSample(MAIN, 1, "python", "R", 40.0, 900 * MIB, 500 * MIB, 8, 2048 * MIB, main_sm),
             ProcSample(W1, MAIN, "python", "R", worker_cpu, 300 * MIB, 50 * MIB, 2, None, None),
             ProcSample(W2, MAIN, "python", "R", worker_cpu, 300 * MIB, 50 * MIB, 2, None, None),
             ProcSample(TRACKER, MAIN, "python", "S", 0.0, 20 * MIB, 10 * MIB, 1, None, None)]
    gpu = [GpuProcessSample(MAIN, 0, 2048 * MIB, main_sm)]
    if helper_mem is not None:
        procs.append(ProcSample(HELPER, MAIN, "python", "S", 0.0, 400 * MIB, 80 * MIB, 2, helper_mem, helper_sm))
        gpu.append(GpuProcessSample(HELPER, 0, helper_mem, helper_sm))
    dev = DeviceSample(0, "FAKE GPU", "GPU-fake-0", util, 5.0, 3 << 30, 80 << 30, 50.0, 100.0, 1500)
    return SampleBatch(int(t_s * 10), t_ns, t_ns, None, tuple(procs), (dev,), tuple(gpu))


def _feed(watch: TelemetryWatch, seconds: float, start: float = 0.0, **kw) -> None:
    """Ticks every 0.1 s from ``start`` for ``seconds``."""
    for i in range(int(seconds * 10)):
        watch.add(fake_gpu_batch(start + i / 10, **kw))


def _codes(watch: TelemetryWatch) -> dict:
    return {f.code: f for f in watch.findings()}


def test_input_bound_when_the_gpu_idles_and_its_workers_are_cpu_bound():
    watch = TelemetryWatch()
    _feed(watch, 8, util=5.0, worker_cpu=99.0)
    f = _codes(watch)["input-bound"]
    assert f.pids == (MAIN,) and f.evidence.number("workers") == 2
    assert f.evidence.number("input-bound share") == 1.0 and "num_workers" in f.fix and "pin_memory" in f.fix


@pytest.mark.parametrize("kw", [dict(util=95.0, worker_cpu=99.0),     # GPU busy: not input-bound
                                dict(util=5.0, worker_cpu=20.0)],     # workers idle too: waiting elsewhere
                         ids=["gpu-busy", "workers-idle"])
def test_not_input_bound(kw):
    watch = TelemetryWatch()
    _feed(watch, 8, **kw)
    assert "input-bound" not in _codes(watch)


def test_input_bound_needs_a_long_enough_window():
    watch = TelemetryWatch()
    _feed(watch, 3, util=5.0, worker_cpu=99.0)
    assert "input-bound" not in _codes(watch)


def test_several_cuda_contexts_on_one_gpu_with_memory_per_context():
    watch = TelemetryWatch()
    _feed(watch, 1, util=90.0, worker_cpu=50.0, helper_mem=600 * MIB, helper_sm=20.0)
    f = _codes(watch)["cuda-contexts"]
    assert f.pids == (MAIN, HELPER) and f.evidence.number("MiB in all") == 2048 + 600
    assert "2048, 600 MiB" in f.title and "children of another holder" in f.title


def test_one_context_per_gpu_is_clean():
    watch = TelemetryWatch()
    _feed(watch, 12, util=90.0, worker_cpu=50.0)
    assert _codes(watch) == {}


def test_idle_gpu_memory_holder_after_ten_seconds():
    watch = TelemetryWatch()
    _feed(watch, 9, util=90.0, worker_cpu=50.0, helper_mem=600 * MIB, helper_sm=0.0)
    assert "idle-gpu-memory" not in _codes(watch)           # 9 s idle: not yet
    _feed(watch, 3, 9, util=90.0, worker_cpu=50.0, helper_mem=600 * MIB, helper_sm=0.0)
    f = _codes(watch)["idle-gpu-memory"]
    assert f.pids == (HELPER,) and f.evidence.number("MiB held") == 600


def test_busy_or_small_gpu_memory_holders_are_not_idle():
    watch = TelemetryWatch()
    _feed(watch, 15, util=90.0, worker_cpu=50.0, helper_mem=600 * MIB, helper_sm=30.0)
    _feed(watch, 15, 15, util=90.0, worker_cpu=50.0, helper_mem=100 * MIB, helper_sm=0.0)
    assert "idle-gpu-memory" not in _codes(watch)


# -- OOM kills from the cgroup -------------------------------------------------------------------------

def test_oom_kill_counter_of_cgroup_v2_and_v1_files(tmp_path):
    v2 = tmp_path / "unified" / "job"
    v2.mkdir(parents=True)
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n")
    cg = tmp_path / "cgroup"
    cg.write_text("0::/job\n")
    path = process_rules.memory_events_path(str(cg), str(tmp_path / "unified"))
    assert path == str(v2 / "memory.events") and process_rules.oom_kills(path) == 2
    v1 = tmp_path / "v1" / "memory"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    cg.write_text("4:memory:/somewhere/else\n0::/\n")       # a container: its own cgroup is the mount's root
    path = process_rules.memory_events_path(str(cg), str(tmp_path / "v1"))
    assert path == str(v1 / "memory.oom_control") and process_rules.oom_kills(path) == 5
    assert process_rules.oom_kills(tmp_path / "missing") is None


def test_a_sigkill_with_oom_kills_in_the_cgroup_says_so():
    facts = process_rules.ProcessFacts(child_exits={4242: -signal.SIGKILL})
    [f] = process_rules.died_by_signal(facts, {4242: "pool worker"}, False, oom_killed=1)
    assert f.evidence.number("OOM kills") == 1 and f.fix.startswith("the OOM killer ended 1 process")
    [plain] = process_rules.died_by_signal(facts, {4242: "pool worker"}, False)
    assert plain.evidence.number("OOM kills") is None and "often means the OOM killer" in plain.fix
    [only] = process_rules.died_by_signal(process_rules.ProcessFacts(), {}, False, oom_killed=2)
    assert only.code == "died-by-signal" and "2 process(es)" in only.title
    assert process_rules.died_by_signal(process_rules.ProcessFacts(), {}, False) == []


def test_a_growing_live_finding_is_updated_not_repeated():
    """A second worker copying its pages too: the recorder keeps one cow-lost finding, with both."""
    from gpuscope.finding import Finding
    from gpuscope.findings.recorder import FindingsRecorder

    shown = []
    rec = FindingsRecorder(shown.append)
    rec._report([Finding("cow-lost", "1 fork child", pids=(11,), first_seen_ns=5, source="live")])
    rec._report([Finding("cow-lost", "2 fork children", pids=(11, 12), first_seen_ns=9, source="live")])
    [f] = rec.findings()
    assert f.pids == (11, 12) and f.title == "2 fork children" and f.first_seen_ns == 5
    assert [x.pids for x in shown] == [(11,)]
    rec._report([Finding("died-by-signal", "a", pids=(11,)), Finding("died-by-signal", "b", pids=(11, 12))])
    assert len([x for x in rec.findings() if x.code == "died-by-signal"]) == 2     # other codes as before
