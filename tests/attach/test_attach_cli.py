"""``gpuscope attach PID`` on real jobs started outside gpuscope (no injection, no test double)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.procs.read import snapshot
from tests.attach.helpers import end_tree

pytestmark = pytest.mark.timeout(180)

POOL_JOB = """
import multiprocessing as mp, sys, time
def work(x):
    time.sleep(0.3)
    return x * x
if __name__ == "__main__":
    mp.set_start_method("spawn")
    with mp.Pool(3) as pool:
        out = []
        for i in range(int(sys.argv[1])):
            out += pool.map(work, range(3))
    print("result", sum(out), flush=True)
    sys.exit(3)
"""

DEADLOCK_JOB = """
import multiprocessing as mp, threading, time
LOCK = threading.Lock()
def hold():
    with LOCK:
        time.sleep(3600)
def wait_for_the_lock(x):
    with LOCK:          # held by a thread of the parent at fork time: never released in the child
        return x
if __name__ == "__main__":
    mp.set_start_method("fork")
    threading.Thread(target=hold, daemon=True).start()
    time.sleep(0.2)
    with mp.Pool(2) as pool:
        pool.map(wait_for_the_lock, range(4))
"""


def _start(tmp_path: Path, code: str, *args: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "job.py"
    script.write_text(code)
    return subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _wait_for_children(pid: int, n: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        procs = snapshot()
        tree, todo = set(), [pid]
        while todo:
            p = todo.pop()
            tree.add(p)
            todo += [q.pid for q in procs.values() if q.ppid == p and q.pid not in tree]
        if len(tree) - 1 >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"the job did not start {n} children")


def _attach(run_env: dict[str, str], pid: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", "attach", str(pid), *args], env=run_env,
                          capture_output=True, text=True, timeout=timeout)


def _final(out: str) -> dict:
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    assert lines and lines[-1]["final"] is True
    return lines[-1]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    end_tree(proc)                      # the test's own job, its whole tree


def test_spawn_pool_roles_and_the_job_unchanged(tmp_path, run_env):
    job = _start(tmp_path, POOL_JOB, "20")
    before = sorted(os.listdir(tmp_path))
    try:
        _wait_for_children(job.pid, 4)
        got = _attach(run_env, job.pid, "--duration", "3", "--json")
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        roles = {p["pid"]: p["role"] for p in view["processes"]}
        assert roles[job.pid] == "main"
        assert sorted(r for r in roles.values() if r != "main") == ["pool worker"] * 3 + ["resource tracker"]
        for p in view["processes"]:
            assert set(p) >= {"pid", "ppid", "role", "rank", "cmdline", "cpu_s", "rss_bytes", "gpu_mem_bytes", "state"}
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            _kill_group(job)
    assert job.returncode == 3                              # its own exit code and output
    assert out == b"result 100\n" and err == b""
    assert sorted(os.listdir(tmp_path)) == before          # nothing left in the job's folder
    run = json.loads((Path(run_env["GPUSCOPE_HOME"]) / "runs" / view["run_id"] / "summary.json").read_text())
    assert run["kind"] == "attached" and {p["role"] for p in run["processes"]} >= {"pool worker", "main"}


def test_fork_pool_deadlock_names_the_waiting_function_and_looks_stuck(tmp_path, run_env):
    job = _start(tmp_path, DEADLOCK_JOB)
    try:
        _wait_for_children(job.pid, 2)
        time.sleep(1.0)
        got = _attach(run_env, job.pid, "--duration", "5", "--stacks", "--json")
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        workers = [p for p in view["stacks"]["processes"] if p["role"] == "pool worker"]
        assert len(workers) == 2, view["stacks"]["processes"]
        for w in workers:
            functions = [f["function"] for t in w["threads"] for f in t["frames"]]
            assert "wait_for_the_lock" in functions
        codes = {f["code"]: f for f in view["findings"]}
        assert "looks-stuck" in codes, view["findings"]
        assert any("wait_for_the_lock" in line for line in codes["looks-stuck"]["evidence"]["excerpts"])
    finally:
        _kill_group(job)
    findings = subprocess.run([sys.executable, "-m", "gpuscope", "findings", view["run_id"], "--json"], env=run_env,
                              capture_output=True, text=True, timeout=60)
    assert findings.returncode == 0, findings.stderr
    assert "looks-stuck" in findings.stdout


def test_a_pool_that_sleeps_between_tasks_does_not_look_stuck(tmp_path, run_env):
    job = _start(tmp_path, POOL_JOB, "40")
    try:
        _wait_for_children(job.pid, 4)
        got = _attach(run_env, job.pid, "--duration", "4", "--stacks", "--json", "--stuck-after", "1")
        assert got.returncode == 0, got.stderr
        assert "looks-stuck" not in {f["code"] for f in _final(got.stdout)["findings"]}
    finally:
        _kill_group(job)


@pytest.mark.parametrize("pid", ["999999999", "0"])
def test_nothing_to_attach_is_one_line_and_exit_2(run_env, pid):
    got = _attach(run_env, int(pid))
    assert got.returncode == 2 and "no process" in got.stderr and len(got.stderr.strip().splitlines()) == 1


def test_a_process_that_is_not_python(run_env):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        got = _attach(run_env, sleeper.pid)
        assert got.returncode == 2 and "not a Python program" in got.stderr, got.stderr
        assert "Traceback" not in got.stderr
    finally:
        sleeper.kill()
        sleeper.wait()


TORCH_JOB = """
import time
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
time.sleep(3600)
"""


def test_torchrun_agent_and_ranks(tmp_path, run_env):
    script = tmp_path / "ddp.py"
    script.write_text(TORCH_JOB)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    job = subprocess.Popen([torchrun, "--standalone", "--nproc-per-node", "2", str(script)], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_children(job.pid, 2, timeout_s=120)
        got = _attach(run_env, job.pid, "--duration", "2", "--json")
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        roles = sorted(p["role"] for p in view["processes"])
        assert roles == ["rank 0", "rank 1", "torchrun agent"], roles
        assert sorted(p["rank"] for p in view["processes"] if p["rank"] is not None) == [0, 1]
    finally:
        _kill_group(job)


OTHER_USER_JOB = """
import os, time
child = os.fork()
if child == 0:                      # becomes nobody's process (no exec: the interpreter is root's)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    time.sleep(3600)
    os._exit(0)
print(child, flush=True)
time.sleep(3600)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process of another user")
def test_another_users_process_is_refused_with_the_reason_and_the_rest_shown(tmp_path, run_env):
    # the job runs as root, its child as nobody (65534); gpuscope attaches as root without CAP_SYS_PTRACE
    # (as in a container), so only the root-owned process may be read
    script = tmp_path / "job.py"
    script.write_text(OTHER_USER_JOB)
    script.chmod(0o644)
    job = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                           start_new_session=True)
    try:
        nobodys = int(job.stdout.readline())
        got = subprocess.run(["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace",
                              sys.executable, "-m", "gpuscope", "attach", str(job.pid), "--duration", "2",
                              "--stacks", "--json", "--no-record"],
                             env=run_env, capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        assert {p["pid"] for p in view["processes"]} == {job.pid, nobodys}       # shown, both
        refused = {r["reason"]: r for r in view["refused"]}
        other = refused["other-user"]
        assert other["pids"] == [nobodys] and "nobody (uid 65534)" in other["text"], other
        assert "CAP_SYS_PTRACE" in other["text"] and "SYS_PTRACE" in other["fix"]
        # root's own process holds capabilities the stripped gpuscope lacks: refused too, said so
        assert refused["no-ptrace-capability"]["pids"] == [job.pid]
        assert all(p["note"].startswith("not readable: ") for p in view["stacks"]["processes"])
    finally:
        _kill_group(job)


def test_gpuscope_stacks_of_a_tree_gpuscope_did_not_start(tmp_path, run_env):
    job = _start(tmp_path, DEADLOCK_JOB)
    try:
        _wait_for_children(job.pid, 2)
        got = subprocess.run([sys.executable, "-m", "gpuscope", "stacks", str(job.pid), "--json"], env=run_env,
                             capture_output=True, text=True, timeout=60)
        assert got.returncode == 0, got.stderr
        data = json.loads(got.stdout)
        assert data["run_id"] is None and data["root_pid"] == job.pid
        by_role: dict[str, list] = {}
        for p in data["processes"]:
            by_role.setdefault(p["role"], []).append(p)
        assert len(by_role["pool worker"]) == 2 and len(by_role["main"]) == 1
        main_threads = {t["name"] for t in by_role["main"][0]["threads"]}
        assert "MainThread" in main_threads and any("hold" in n for n in main_threads)
    finally:
        _kill_group(job)


def test_ctrl_c_only_detaches_and_the_report_reads_the_session(tmp_path, run_env):
    job = _start(tmp_path, POOL_JOB, "30")
    try:
        _wait_for_children(job.pid, 4)
        attach = subprocess.Popen([sys.executable, "-m", "gpuscope", "attach", str(job.pid), "--json",
                                   "--interval", "0.5"], env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        assert attach.stdout is not None
        interval_lines = [json.loads(attach.stdout.readline()) for _ in range(2)]   # one per interval
        assert [line["final"] for line in interval_lines] == [False, False]
        attach.send_signal(signal.SIGINT)
        rest, err = attach.communicate(timeout=60)
        assert attach.returncode == 0, err
        view = _final(rest)
        assert not view["ended"] and any("detached" in n for n in view["notes"])
        assert job.poll() is None                     # the job was sent nothing: it goes on
        out, _ = job.communicate(timeout=120)
        assert job.returncode == 3 and out == b"result 150\n"
    finally:
        if job.poll() is None:
            _kill_group(job)
    report = subprocess.run([sys.executable, "-m", "gpuscope", "report", view["run_id"]], env=run_env,
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    assert f"attached run {view['run_id']}" in report.stdout and "pool worker" in report.stdout, report.stdout
    history = subprocess.run([sys.executable, "-m", "gpuscope", "history"], env=run_env, capture_output=True,
                             text=True, timeout=60)
    (row,) = [ln for ln in history.stdout.splitlines() if ln.startswith(view["run_id"])]
    assert "attached" in row and "job.py" in row


DATALOADER_JOB = """
import time
import torch
from torch.utils.data import DataLoader, Dataset
class Slow(Dataset):
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        time.sleep(0.05)
        return torch.zeros(2)
if __name__ == "__main__":
    for batch in DataLoader(Slow(), batch_size=4, num_workers=2):
        pass
"""


def test_dataloader_workers_are_told_by_their_stacks(tmp_path, run_env):
    job = _start(tmp_path, DATALOADER_JOB)
    try:
        _wait_for_children(job.pid, 2, timeout_s=120)
        got = _attach(run_env, job.pid, "--duration", "2", "--json")
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        roles = sorted(p["role"] for p in view["processes"])
        assert roles == ["DataLoader worker", "DataLoader worker", "main"], roles
        assert {p["start_method"] for p in view["processes"] if p["role"] == "DataLoader worker"} == {"fork"}
    finally:
        _kill_group(job)


SKIPPING_RANK_JOB = """
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
open(f"past-barrier-{dist.get_rank()}", "w").close()
if dist.get_rank() == 1:
    time.sleep(3600)              # rank 1 never joins the next collective
else:
    dist.barrier()
"""


def test_a_rank_not_in_the_collective_the_others_wait_in(tmp_path, run_env):
    script = tmp_path / "ddp.py"
    script.write_text(SKIPPING_RANK_JOB)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    job = subprocess.Popen([torchrun, "--standalone", "--nproc-per-node", "2", str(script)], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while not all((tmp_path / f"past-barrier-{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline and job.poll() is None, "the ranks did not pass the first barrier"
            time.sleep(0.2)
        time.sleep(0.5)
        got = _attach(run_env, job.pid, "--duration", "2", "--stacks", "--json")
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        (found,) = [f for f in view["findings"] if f["code"] == "rank-not-in-collective"]
        rank1 = next(p["pid"] for p in view["processes"] if p["role"] == "rank 1")
        assert found["pids"] == [rank1] and "rank 1 is elsewhere" in found["title"], found["title"]
    finally:
        _kill_group(job)


def test_following_ends_when_the_job_ends(tmp_path, run_env):
    job = _start(tmp_path, POOL_JOB, "4")         # about 1.2 s of tasks
    try:
        _wait_for_children(job.pid, 4)
        got = _attach(run_env, job.pid, "--duration", "100", "--json")
        assert got.returncode == 0, got.stderr
        view = _final(got.stdout)
        assert view["ended"] and not any(p["alive"] for p in view["processes"])
        assert {p["role"] for p in view["processes"]} >= {"main", "resource tracker"}
        assert job.wait(timeout=60) == 3
    finally:
        if job.poll() is None:
            _kill_group(job)
    summary = json.loads((Path(run_env["GPUSCOPE_HOME"]) / "runs" / view["run_id"] / "summary.json").read_text())
    assert summary["status"] == "exited" and summary["kind"] == "attached"


BURN_JOB = """
import multiprocessing as mp
def burn(n):
    return sum(i * i for i in range(n))
if __name__ == "__main__":
    mp.set_start_method("spawn")
    with mp.Pool(2) as pool:
        while True:
            pool.map(burn, [300_000] * 4)
"""


def test_profile_of_the_whole_tree(tmp_path, run_env):
    job = _start(tmp_path, BURN_JOB)
    try:
        _wait_for_children(job.pid, 3)
        got = _attach(run_env, job.pid, "--duration", "3", "--profile", "2", "--json")
        assert got.returncode == 0, got.stderr
        prof = _final(got.stdout)["profile"]
        assert prof["samples"] > 0, prof
        top = prof["top"]["pool worker"]
        assert top[0]["function"].startswith("burn") and top[0]["share"] > 0.5, top
        assert Path(prof["path"]).parent.name == _final(got.stdout)["run_id"]     # in the run's folder
        assert json.loads(Path(prof["path"]).read_text())["profiles"]
    finally:
        _kill_group(job)
