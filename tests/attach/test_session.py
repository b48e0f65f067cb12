"""The attach API (what the app's picker and live view call) on real processes.

NVML is the FakeNvml TEST DOUBLE (tests/fakes/fake_nvml.py): there is no GPU on the test machines;
everything else is real (processes, /proc, py-spy, the store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.attach import roles
from gpuscope.attach.candidates import list_trees
from gpuscope.attach.session import AttachSession
from gpuscope.telemetry.gpu import NvmlBackend
from tests.attach.helpers import end_tree
from tests.fakes.fake_nvml import FakeGpu, FakeNvml

pytestmark = pytest.mark.timeout(120)

BURN_POOL = """
import multiprocessing as mp, sys, time
def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
if __name__ == "__main__":
    mp.set_start_method("spawn")
    print("ready", flush=True)
    with mp.Pool(2) as pool:
        while True:
            pool.map(burn, [200_000] * 8)
"""


def _job(tmp_path: Path, code: str) -> subprocess.Popen[str]:
    script = tmp_path / "job.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    end_tree(proc)                      # the test's own job, its whole tree


def _until(check, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _fake_gpu(holders: dict[int, int]) -> NvmlBackend:
    return NvmlBackend(FakeNvml([FakeGpu(processes=dict(holders), util_gpu=0)]))


def test_the_picker_lists_the_job_once_with_its_tree(tmp_path):
    job = _job(tmp_path, BURN_POOL)
    try:
        _until(lambda: any(r.root_pid == job.pid and r.nprocs == 4 for r in list_trees()))
        rows = list_trees(gpu=_fake_gpu({job.pid: 1 << 30}))
        (row,) = [r for r in rows if r.root_pid == job.pid]
        assert row.kind == "multiprocessing parent" and row.gpu_mem_bytes == 1 << 30
        assert row.cmdline[-1].endswith("job.py") and row.rss_bytes > 0 and "root" in row.user
        workers = {r.root_pid for r in rows} & set(_children(job.pid))
        assert not workers                               # counted in their job, not listed on their own
    finally:
        _end(job)


def _children(pid: int) -> list[int]:
    from gpuscope.procs.read import snapshot

    return [p.pid for p in snapshot().values() if p.ppid == pid]


def test_profile_names_the_hot_function_per_role_and_writes_speedscope(tmp_path):
    job = _job(tmp_path, BURN_POOL)
    session = AttachSession(job.pid, 0.5, record=False)
    try:
        session.start()
        _until(lambda: sum(p.role == "pool worker" for p in session.view().processes) == 2)
        prof = session.profile(2)
        assert prof.samples > 0, prof.note
        assert prof.top["pool worker"][0].function == "burn"
        data = json.loads(Path(prof.path).read_text())
        assert data["$schema"].startswith("https://www.speedscope.app")
    finally:
        session.detach()
        _end(job)


IDLE_HOLDER = """
import time
print("ready", flush=True)
time.sleep(3600)
"""


def test_idle_gpu_memory_from_the_samples(tmp_path, monkeypatch):
    from gpuscope.findings import telemetry_rules

    monkeypatch.setattr(telemetry_rules, "IDLE_S", 1.0)      # the telemetry rule's own, on the attached tree
    job = _job(tmp_path, IDLE_HOLDER)
    session = AttachSession(job.pid, 0.1, record=False, gpu=_fake_gpu({job.pid: 2 << 30}), stuck_after_s=1.0)
    try:
        session.start()
        _until(lambda: "idle-gpu-memory" in {f.code for f in session.findings()})
        (found,) = [f for f in session.findings() if f.code == "idle-gpu-memory"]
        assert found.pids == (job.pid,) and "2048 MiB" in found.title
    finally:
        session.detach()
        _end(job)


ZOMBIE_MAKER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "pass"])
print("ready", flush=True)
time.sleep(3600)            # never waits for it
"""


def test_a_child_nobody_waits_for_is_a_zombie(tmp_path):
    job = _job(tmp_path, ZOMBIE_MAKER)
    session = AttachSession(job.pid, 0.1, record=False)
    try:
        session.start()
        _until(lambda: "zombie" in {f.code for f in session.findings()})
        (found,) = [f for f in session.findings() if f.code == "zombie"]
        assert len(found.pids) == 1 and found.pids[0] != job.pid
    finally:
        session.detach()
        _end(job)


LEAVER = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
print("ready", flush=True)
time.sleep(1.5)             # then ends without ending its child
"""


def test_a_root_that_ends_leaving_a_child_is_left_running(tmp_path):
    job = _job(tmp_path, LEAVER)
    session = AttachSession(job.pid, 0.1, record=True)
    try:
        session.start()
        job.wait(timeout=30)
        _until(lambda: "left-running" in {f.code for f in session.findings()})
        view = session.detach()
        assert view.process(job.pid) is not None and not view.process(job.pid).alive
        record = json.loads((Path(session.run_dir or "") / "summary.json").read_text())
        assert record["kind"] == "attached" and "left-running" in {f["code"] for f in record["findings"]}
    finally:
        session.detach()
        _end(job)


@pytest.mark.parametrize("argv, role", [
    (("python", "-m", "ipykernel_launcher", "-f", "/root/.local/share/jupyter/runtime/kernel-1.json"),
     "jupyter kernel"),
    (("/usr/bin/python3", "-m", "joblib.externals.loky.backend.popen_loky_posix", "--process-name",
      "LokyProcess-1", "--pipe", "9"), "loky worker"),
    (("python", "/venv/lib/python3.11/site-packages/ray/_private/workers/default_worker.py", "--node-ip-address=1"),
     "ray worker"),
    (("ray::IDLE",), "ray worker"),
    (("/venv/bin/python", "/venv/bin/torchrun", "--nproc-per-node", "2", "train.py"), "torchrun agent"),
    (("python", "-c", "from multiprocessing.forkserver import main; main(8, 9, ['__main__'], **{})"), "forkserver"),
])
def test_command_lines_of_known_roles(argv, role):
    found = roles.by_command(argv)
    assert found is not None and found.role == role


SHM_LEAKER = """
import time
from multiprocessing import resource_tracker, shared_memory
shm = shared_memory.SharedMemory(create=True, size=1 << 20)
resource_tracker.unregister(shm._name, "shared_memory")    # nobody will unlink it
print(shm.name, flush=True)
time.sleep(2)
"""


def test_shared_memory_the_job_leaves_behind(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SHM_LEAKER)
    job = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert job.stdout is not None
    name = job.stdout.readline().strip().lstrip("/")
    session = AttachSession(job.pid, 0.1, record=False)
    try:
        session.start()
        assert session.wait_ended(30)
        view = session.detach()
        (found,) = [f for f in view.findings if f.code == "leaked-shm"]
        assert found.pids == (job.pid,) and f"/dev/shm/{name}" in found.evidence.excerpts[0]
        assert found.action is not None and found.action.names == (name,)
    finally:
        session.detach()
        _end(job)
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")        # the test's own segment


def test_a_process_that_ends_while_attaching(tmp_path, monkeypatch):
    from gpuscope.attach import session as session_module
    from gpuscope.errors import UserError

    job = _job(tmp_path, IDLE_HOLDER)
    checked = session_module.check_target

    def check_then_end(pid: int):
        info = checked(pid)
        _end(job)                                   # it ends between the check and the adoption
        return info

    monkeypatch.setattr(session_module, "check_target", check_then_end)
    session = AttachSession(job.pid, 0.1)
    with pytest.raises(UserError, match=f"process {job.pid} ended while attaching"):
        session.start()
    record = json.loads((Path(session.run_dir or "") / "summary.json").read_text())
    assert record["status"] == "exited" and record["notes"] == ["the process ended while attaching"]
