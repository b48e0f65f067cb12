"""Torch allocator memory: the in-process reporter (real subprocesses) and the I-line reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpuscope.telemetry.torch_memory import parse_torch_mem, read_torch_mem
from tests import requires

ROOT = Path(__file__).resolve().parents[2]
FAKE_TORCH = ROOT / "tests" / "fakes" / "faketorch"

PRELUDE = """
    import json, os, sys, threading, time
    sys.path.insert(0, {root!r})
    from gpuscope.inject import torchmem
    OUT = open({out!r}, "a")
    def emit(info):
        OUT.write(json.dumps({{"pid": os.getpid(), **info}}) + "\\n"); OUT.flush()
    def threads():
        return sorted(t.name for t in threading.enumerate())
"""


def run(code: str, tmp_path: Path, fake_torch: bool) -> list[dict]:
    out = tmp_path / "emitted.jsonl"
    prelude = PRELUDE.format(root=str(ROOT), out=str(out))
    if fake_torch:
        prelude += f"    sys.path.insert(0, {str(FAKE_TORCH)!r})\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(prelude) + textwrap.dedent(code)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


def test_no_thread_and_no_report_without_cuda_use(tmp_path):
    emitted = run("""
        torchmem.start(emit, 0.02)
        import torch
        assert torch.FAKE and threads() == ["MainThread"], threads()
        time.sleep(0.2)
        assert threads() == ["MainThread"], threads()
        assert torch.cuda._lazy_init._gpuscope_wrapped
    """, tmp_path, fake_torch=True)
    assert emitted == []


def test_reports_after_cuda_initializes_and_unwraps(tmp_path):
    emitted = run("""
        torchmem.start(emit, 0.02)
        import torch
        torch.cuda.MEM[1].update(allocated=100, reserved=2048, max_allocated=300)
        getattr(torch.cuda, "_lazy_init")()          # what torch's C++ does on first CUDA use
        assert not hasattr(torch.cuda._lazy_init, "_gpuscope_wrapped")   # original is back
        assert "gpuscope-torchmem" in threads()
        time.sleep(0.2)
        torch.cuda.MEM[1].update(allocated=700, max_allocated=700)
        time.sleep(0.2)
        torchmem.start(emit, 0.02)                     # idempotent: still one thread
        assert threads().count("gpuscope-torchmem") == 1
    """, tmp_path, fake_torch=True)
    mems = [e["torch_mem"] for e in emitted]
    assert mems[0] == {"1": {"allocated": 100, "reserved": 2048, "max_allocated": 300}}
    assert mems[-1] == {"1": {"allocated": 700, "reserved": 2048, "max_allocated": 700}}
    assert 2 <= len(mems) <= 4          # on change (and a 1 s keepalive), not every tick


def test_fork_child_initializing_cuda_reports_itself(tmp_path):
    emitted = run("""
        torchmem.start(emit, 0.02)
        import torch
        pid = os.fork()
        if pid == 0:
            torchmem.start(emit, 0.02)                 # as the run engine does in fork children
            torch.cuda.MEM[0].update(allocated=5, reserved=10, max_allocated=5)
            torch.cuda.current_device()                # a Python-side first CUDA use
            mine = f'{{"pid": {os.getpid()}, "torch_mem"'
            deadline = time.monotonic() + 60           # until its reporter thread has emitted
            while time.monotonic() < deadline and not any(l.startswith(mine) for l in open(OUT.name)):
                time.sleep(0.02)
            OUT.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        assert threads() == ["MainThread"], threads()
        emit({"child": pid})
    """, tmp_path, fake_torch=True)
    child = [e for e in emitted if "child" in e]
    assert len(child) == 1, emitted
    parent, child_pid = child[0]["pid"], child[0]["child"]
    mem = [e for e in emitted if "torch_mem" in e]
    assert mem and {e["pid"] for e in mem} == {child_pid} and child_pid != parent   # the child, only
    assert mem[0]["torch_mem"] == {"0": {"allocated": 5, "reserved": 10, "max_allocated": 5}}


def test_no_torch_at_all_costs_no_thread(tmp_path):
    emitted = run("""
        torchmem.start(emit, 0.02)
        import json, email.message
        time.sleep(0.1)
        assert threads() == ["MainThread"]
    """, tmp_path, fake_torch=False)
    assert emitted == []


@pytest.mark.torch
def test_real_cpu_torch_gets_no_thread_and_its_cuda_error_is_unchanged(tmp_path):
    requires.torch()
    emitted = run("""
        torchmem.start(emit, 0.02)
        import torch
        x = torch.ones(1000) * 2
        assert torch.cuda._lazy_init._gpuscope_wrapped
        try:
            torch.zeros(1, device="cuda")
        except (AssertionError, RuntimeError) as exc:
            assert "CUDA" in str(exc), exc
        else:
            raise SystemExit("a CPU build made a CUDA tensor?")
        time.sleep(0.1)
        assert "gpuscope-torchmem" not in threads(), threads()
    """, tmp_path, fake_torch=False)
    assert emitted == []


def test_reader_parses_i_lines_of_a_run_folder(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    lines = [
        "H\t" + json.dumps({"v": 1, "pid": 4321}) + "\n",
        "I\t100\t" + json.dumps({"role": "rank 0"}) + "\n",
        "I\t200\t" + json.dumps({"torch_mem": {"0": {"allocated": 1, "reserved": 4, "max_allocated": 1}}}) + "\n",
        "R\t1\t2\t3\t4\tP\n",
        "I\t300\t" + json.dumps({"torch_mem": {"0": {"allocated": 3, "reserved": 4, "max_allocated": 3},
                                               "1": {"allocated": 9, "reserved": 9, "max_allocated": 9}}}) + "\n",
        "I\t400\tnot json\n",
        "I\t500\t" + json.dumps({"torch_mem": {"0": {"allocated": 7}}}),     # truncated: no newline
    ]
    (events / "4321-99.log").write_text("".join(lines))
    (events / "555-1.log").write_text("H\t" + json.dumps({"pid": 555}) + "\n")
    got = read_torch_mem(tmp_path)
    assert list(got) == [4321]
    d0, d1 = got[4321][0], got[4321][1]
    assert d0["t_ns"].tolist() == [200, 300] and d0["allocated"].tolist() == [1, 3]
    assert d1["reserved"].tolist() == [0, 9]
    assert parse_torch_mem([]) == {}
    assert isinstance(d0["max_allocated"], np.ndarray)
