"""Qt-free view models on real runs: the live model fed from a run's stream, the leftovers line
followed after the run, and the launch panel's checks of a script's text (no Qt imported)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

from gpuscope import api
from gpuscope.spec import RunSpec
from gpuscope.views.launch_checks import fork_warning, gpu_features
from gpuscope.views.left_running import LeftRunning
from gpuscope.views.live_model import LiveModel
from gpuscope.views.procroles import RoleReader
from gpuscope.views.run_status import describe_result

POOL = textwrap.dedent("""
    import multiprocessing as mp, time

    def work(i):
        time.sleep(0.3)
        return i

    if __name__ == "__main__":
        with mp.get_context("spawn").Pool(2) as pool:
            print(sum(pool.map(work, range(6))), flush=True)
""")

LEAVES_A_SLEEPER = textwrap.dedent("""
    import subprocess, sys
    p = subprocess.Popen(["sleep", "120"], start_new_session=True)   # escapes the run's session
    print(p.pid, flush=True)
""")


def _run(tmp_path, text: str) -> tuple[object, api.RunStream]:
    path = tmp_path / "prog.py"
    path.write_text(text)
    stream = api.RunStream()
    run = api.start_run(RunSpec(script=str(path), python=sys.executable), stream)
    return run.wait(), stream


def test_the_live_model_from_a_runs_stream_and_roles(tmp_path):
    result, stream = _run(tmp_path, POOL)
    model = LiveModel()
    for batch in stream.drain_batches():
        model.add(batch)
    assert model.batches > 0 and model.last_t > 0
    identities, exits = RoleReader(result.run_dir).read()
    model.set_identities(identities, exits)
    roles = sorted(r.role for r in model.procs.values() if r.role)
    assert roles.count("pool worker") == 2 and "main" in roles, roles
    cpu_pids = {subject for kind, _, subject, _ in model.curves("cpu") if kind == "proc"}
    assert {pid for pid, ident in identities.items() if ident.role == "pool worker"} <= cpu_pids
    workers = [r for r in model.procs.values() if r.role == "pool worker"]
    assert all(r.peak_rss and r.peak_rss > 1 << 20 for r in workers), [(r.pid, r.peak_rss) for r in workers]
    model.set_process_rows(result.processes, result.left_running)
    assert all(not r.alive for r in model.procs.values() if r.role == "pool worker")


def test_the_leftovers_line_says_when_they_have_ended(tmp_path):
    result, stream = _run(tmp_path, LEAVES_A_SLEEPER)
    out = b"".join(bytes(c) for name, c, _ in stream.drain_output()[0] if name == "stdout")
    sleeper = int(out.split()[0])
    try:
        assert sleeper in result.left_running, (result.left_running, result.notes)
        left = LeftRunning.of(result, describe_result(result))
        assert left is not None and left.alive == list(result.left_running)
        assert "process(es) still running (see Cleanup)" in left.line
        assert left.update() is None                     # nothing changed yet
    finally:
        os.kill(sleeper, signal.SIGKILL)     # (not our child: its new parent reaps it)
    deadline = time.monotonic() + 30
    while left.still_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    line = left.update()
    assert line is not None and line.endswith("the process(es) it left running have ended") and left.alive == []


def test_launch_checks_read_the_scripts_text(tmp_path):
    cuda = tmp_path / "uses_cuda.py"
    cuda.write_text("import torch\nx = torch.zeros(3).cuda()\n")
    plain = tmp_path / "plain.py"
    plain.write_text("print('hello')\n")
    assert gpu_features(cuda) == ["CUDA"] and gpu_features(plain) == []
    warning = fork_warning(cuda, "fork")
    assert warning is not None and "CUDA" in warning
    assert fork_warning(cuda, "spawn") is None and fork_warning(plain, "fork") is None
