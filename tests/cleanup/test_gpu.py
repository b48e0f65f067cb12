"""GPU suspects: idle GPU-memory holders and GPU memory of pids that do not exist here.

There is no GPU on the test machines, so NVML is the telemetry engineer's test double
(tests/fakes/fake_nvml.py) behind the real backend; the processes are real.
"""

from __future__ import annotations

import sys
import time

import pynvml
from gpuscope.cleanup import Policy, Scanner, perform
from gpuscope.cleanup import model as m
from gpuscope.telemetry.gpu import open_backend
from tests.cleanup.util import wait_quiet
from tests.fakes.fake_nvml import FakeGpu, FakeNvml

GIB = 1 << 30
NO_SUCH_PID = 4_000_000     # above any pid_max this machine allows


def _scanner(gpu: FakeGpu, window: float = 0.6, verify: bool = False) -> Scanner:
    backend = open_backend(nvml=FakeNvml([gpu]))
    assert backend.available
    return Scanner(backend=backend, use_gpu=True, idle_window_s=window, shm_min_age_s=1e9,
                   verify_gpu_pids=verify)


def _watch(scanner: Scanner, seconds: float = 0.8):
    scanner.sample(seconds, interval=0.2)
    return scanner.scan()


def test_sleeping_holder_with_idle_device_is_listed(reaper):
    pid = reaper("sleeper", env={})["pid"]
    wait_quiet(pid)
    gpu = FakeGpu(processes={pid: 2 * GIB}, util_gpu=0)      # no per-process samples
    result = _watch(_scanner(gpu))
    s = result.by_pid(pid)
    assert s is not None and s.codes == [m.IDLE_GPU], result.notes
    assert "holds 2.0 GiB of GPU memory on GPU 0 with 0 % device utilisation" in s.reasons[0].text
    assert "while sleeping" in s.reasons[0].text
    assert s.evidence["gpu_memory_bytes"] == 2 * GIB and s.evidence["gpu_devices"] == [0]
    assert result.gpu_checked and not any("skipped" in n for n in result.notes)
    res = perform(s, policy=Policy(grace_s=1))
    assert res.ok and "2.0 GiB GPU memory freed" in res.message


def test_per_process_sm_utilisation_is_used_when_nvml_gives_it(reaper):
    idle = reaper("sleeper", env={})["pid"]
    busy = reaper("sleeper", env={})["pid"]
    wait_quiet(idle)
    gpu = FakeGpu(processes={idle: GIB, busy: GIB}, sm_util={busy: 35}, util_gpu=35)
    result = _watch(_scanner(gpu))
    s = result.by_pid(idle)
    assert s is not None and "with 0 % SM utilisation" in s.reasons[0].text
    assert result.by_pid(busy) is None


def test_busy_device_without_per_process_numbers_is_not_idle(reaper):
    pid = reaper("sleeper", env={})["pid"]
    result = _watch(_scanner(FakeGpu(processes={pid: GIB}, util_gpu=80)))
    assert result.by_pid(pid) is None


def test_cpu_busy_holder_is_not_idle(reaper):
    code = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
    pid = reaper("spawn", argv=[sys.executable, "-c", code], setsid=True)["pid"]
    result = _watch(_scanner(FakeGpu(processes={pid: GIB}, util_gpu=0)))
    assert result.by_pid(pid) is None


def test_holder_is_listed_only_after_the_window(reaper):
    pid = reaper("sleeper", env={})["pid"]
    scanner = _scanner(FakeGpu(processes={pid: GIB}, util_gpu=0), window=60)
    result = _watch(scanner, 0.4)
    assert result.by_pid(pid) is None
    assert any(n.startswith("idle GPU holders need 60 s of observation") for n in result.notes)


def test_gpu_memory_of_a_missing_pid(reaper):
    result = _watch(_scanner(FakeGpu(processes={NO_SUCH_PID: 3 * GIB}, util_gpu=0)), 0.3)
    s = next(x for x in result.suspects if x.key == f"gpu:{NO_SUCH_PID}")
    assert s.kind == m.KIND_GPU_GHOST and s.codes == [m.GPU_DEAD_PID]
    assert f"3.0 GiB held by pid {NO_SUCH_PID}, which does not exist here" in s.reasons[0].text
    assert s.actions == [] and "--pid=host" in s.advice
    res = perform(s)
    assert res.result == "advice" and not res.ok


def test_pid_without_nvidia_devices_open_is_another_namespaces_pid(reaper):
    pid = reaper("sleeper", env={})["pid"]
    result = _watch(_scanner(FakeGpu(processes={pid: GIB}, util_gpu=0), verify=True))
    assert result.by_pid(pid) is None           # never offered for a kill
    s = next(x for x in result.suspects if x.key == f"gpu:{pid}")
    assert s.codes == [m.GPU_PID_MISMATCH] and "has no /dev/nvidia* device open" in s.reasons[0].text


def test_no_nvml_says_once_why_gpu_checks_were_skipped():
    backend = open_backend(nvml=FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    t0 = time.monotonic()
    scanner = Scanner(backend=backend, idle_window_s=5, shm_min_age_s=1e9)
    result = scanner.scan()
    assert time.monotonic() - t0 < 60   # a bound about waiting on a missing NVML at all, not a speed
    assert not result.gpu_checked and result.gpu_skip_reason
    skipped = [n for n in result.notes if n.startswith("GPU checks skipped:")]
    assert len(skipped) == 1 and result.gpu_skip_reason in skipped[0]


def test_window_zero_turns_the_idle_check_off(reaper):
    pid = reaper("sleeper", env={})["pid"]
    scanner = _scanner(FakeGpu(processes={pid: GIB}, util_gpu=0), window=0)
    result = _watch(scanner, 0.5)
    assert result.by_pid(pid) is None
    assert result.gpu_checked and not any("idle GPU holders need" in n for n in result.notes)


def test_app_can_feed_the_samplers_samples(reaper):
    from gpuscope.telemetry.gpu import DeviceSample, GpuProcessSample

    pid = reaper("sleeper", env={})["pid"]
    wait_quiet(pid)
    backend = open_backend(nvml=FakeNvml([FakeGpu()]))        # the sampler's backend
    procs = [GpuProcessSample(pid, 0, GIB, None)]
    devs = [DeviceSample(0, "x", "u", 0.0, 0.0, GIB, 8 * GIB, 40.0, 100.0, 1000)]
    with Scanner(backend=backend, idle_window_s=0.5, shm_min_age_s=1e9,
                 verify_gpu_pids=False) as scanner:
        for _ in range(4):
            scanner.observe(gpu_processes=procs, gpu_devices=devs)
            time.sleep(0.2)
        result = scanner.scan(gpu_processes=procs, gpu_devices=devs)
    s = result.by_pid(pid)
    assert s is not None and s.codes == [m.IDLE_GPU] and s.evidence["gpu_memory_bytes"] == GIB
    assert backend.available      # a backend the scanner did not open stays open
