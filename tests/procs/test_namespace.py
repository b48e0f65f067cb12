"""PID namespaces with real namespaces (``unshare --pid --fork``, as root): detection, and NVML's
host pids mapped to the namespace's processes. NVML is the FakeNvml test double (no GPU here),
reporting the host pids that the test reads from outside the namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.procs import namespace, read

TESTS = Path(__file__).resolve().parents[1]
needs_unshare = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                   reason="unshare --pid needs root")

INNER = r'''
import json, subprocess, sys
from fakes.fake_nvml import FakeGpu, FakeNvml
from gpuscope.cleanup.gpu_holders import GpuHolding, local_holdings
from gpuscope.cleanup.snapshot import ProcTable
from gpuscope.procs import namespace
from gpuscope.telemetry.gpu import NvmlBackend

kids = [subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); time.sleep(60)", "gpu-holder"],
                         stdout=subprocess.PIPE) for _ in range(2)]
for k in kids:
    k.stdout.readline()
print(json.dumps({"local": [k.pid for k in kids], "host_ns": namespace.in_host_pid_namespace()}), flush=True)
for line in sys.stdin:                       # each line: the host pids NVML reports
    host_pids = json.loads(line)
    nvml = FakeNvml([FakeGpu(processes={p: (i + 1) << 30 for i, p in enumerate(host_pids)})])
    pairs = [(s.pid, s.used_memory_bytes) for s in NvmlBackend(nvml).processes()]
    holder = lambda p: "gpu-holder" in p.cmdline
    found = namespace.map_gpu_pids(pairs, holds_gpu=holder)
    held = {p: GpuHolding(p, mem, [0], None, None, True) for p, mem in pairs}
    local = local_holdings(held, ProcTable.take(), True, holds_gpu=holder)   # cleanup's GPU holders
    print(json.dumps({g.nvml_pid: [g.local_pid, g.confidence, g.used_memory_bytes] for g in found}), flush=True)
    print(json.dumps({pid: h.memory for pid, h in local.items()}), flush=True)
for k in kids:
    k.kill()
    k.wait()
'''


class Inside:
    """A python in a new PID namespace that holds two 'GPU' processes and maps NVML pids."""

    def __init__(self, mount_proc: bool) -> None:
        argv = ["unshare", "--pid", "--fork", "--kill-child"] + (["--mount-proc"] if mount_proc else [])
        env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.proc = subprocess.Popen(argv + [sys.executable, "-c", INNER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.hello = json.loads(self.proc.stdout.readline())

    def host_pids(self) -> list[int]:
        """The holders' pids as the host sees them (oldest first), read from outside."""
        found = []
        for pid, info in read.snapshot().items():
            levels = read.nspids(pid)
            if "gpu-holder" in info.cmdline and len(levels) == 2 and levels[1] in self.hello["local"]:
                found.append((info.start_ticks, levels[1], pid))
        assert len(found) == 2, found
        return [pid for _, _, pid in sorted(found, key=lambda f: self.hello["local"].index(f[1]))]

    def map(self, host_pids: list[int]) -> dict[int, list]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(host_pids) + "\n")
        self.proc.stdin.flush()
        got = {int(k): v for k, v in json.loads(self.proc.stdout.readline()).items()}
        self.holdings = {int(k): v for k, v in json.loads(self.proc.stdout.readline()).items()}
        return got

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def inside(request):
    made = []

    def make(mount_proc: bool) -> Inside:
        made.append(Inside(mount_proc))
        return made[-1]

    yield make
    for i in made:
        i.close()


@needs_unshare
def test_a_new_pid_namespace_is_told_from_the_host(inside):
    ns = inside(mount_proc=True)
    assert ns.hello["host_ns"] is False
    assert namespace.pid_namespace() != namespace.pid_namespace(ns.host_pids()[0])
    assert namespace.in_host_pid_namespace() is (namespace.pid_namespace() == namespace.HOST_PID_NS_INO)


@needs_unshare
def test_host_pids_map_exactly_where_nspid_shows_them(inside):
    ns = inside(mount_proc=False)               # the host's /proc: NSpid lists both levels
    holders = ns.host_pids()
    got = ns.map(holders + [999_999_999])       # and a pid no process has
    assert got[holders[0]] == [holders[0], "exact", 1 << 30]
    assert got[holders[1]] == [holders[1], "exact", 2 << 30]
    assert got[999_999_999] == [None, "unmapped", 3 << 30]


@needs_unshare
def test_host_pids_are_matched_by_start_order_where_nothing_shows_them(inside):
    ns = inside(mount_proc=True)                # the namespace's own /proc: host pids invisible
    holders = ns.host_pids()
    got = ns.map(list(reversed(holders)))       # NVML's order says nothing
    assert got[holders[0]] == [ns.hello["local"][0], "matched", 2 << 30]
    assert got[holders[1]] == [ns.hello["local"][1], "matched", 1 << 30]
    # cleanup's GPU holders are keyed by the namespace's pids, the memory on the right process
    assert ns.holdings == {ns.hello["local"][0]: 2 << 30, ns.hello["local"][1]: 1 << 30}
    # one more NVML process than holders here: no pairing is sure, every memory shown as unmapped
    got = ns.map(holders + [os.getpid()])
    assert [v[1] for v in got.values()] == ["unmapped"] * 3 and sum(v[2] for v in got.values()) == 6 << 30
    assert sorted(ns.holdings) == sorted(holders + [os.getpid()])   # host pids kept, memory not dropped


def test_in_the_host_namespace_a_pid_maps_to_itself():
    me = os.getpid()
    got = namespace.map_gpu_pids([(me, 5), (999_999_999, 7)], host=True)
    assert [(g.local_pid, g.confidence) for g in got] == [(me, "exact"), (None, "unmapped")]
    assert "not visible" in got[1].label


SAMPLER = r'''
import json, subprocess, sys
from fakes.fake_nvml import FakeGpu, FakeNvml
from gpuscope.telemetry.gpu import NvmlBackend
from gpuscope.telemetry.sampler import RunSampler

child = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); time.sleep(60)", "gpu-holder"],
                         stdout=subprocess.PIPE)
child.stdout.readline()
print(json.dumps({"local": [child.pid], "host_ns": None}), flush=True)
host_pid = json.loads(sys.stdin.readline())[0]
sampler = RunSampler(child.pid, 0.05, gpu=NvmlBackend(FakeNvml([FakeGpu(processes={host_pid: 500 << 20})])),
                     host=False)
batch = sampler.sample_once()
print(json.dumps({"rows": [[g.pid, g.used_memory_bytes] for g in batch.gpu_processes],
                  "members": [[p.pid, p.gpu_mem] for p in batch.processes], "notes": list(batch.notes)}), flush=True)
child.kill()
child.wait()
'''


@needs_unshare
def test_the_sampler_keeps_gpu_memory_it_cannot_place(tmp_path):
    """In a container whose processes hold no GPU device here, NVML's host pid cannot be placed:
    the sampler keeps its row with the host pid and says so once, and puts it on no member."""
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c",
                             SAMPLER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        local = json.loads(proc.stdout.readline())["local"][0]
        host = next(pid for pid, info in read.snapshot().items()
                    if "gpu-holder" in info.cmdline and read.nspids(pid) == (pid, local))
        proc.stdin.write(json.dumps([host]) + "\n")
        proc.stdin.flush()
        out = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    assert out["rows"] == [[host, 500 << 20]]
    assert out["members"] == [[local, None]]
    assert out["notes"] == [f"GPU memory of host pid {host} (not visible in this PID namespace): gpuscope runs "
                            "in a container's PID namespace"]
