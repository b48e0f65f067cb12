"""--torch-profile's options in real runs (schedule, ranks, shapes), bad values as one line, and
processes without torch (or an interpreter without it) untouched."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from tests import requires
from tests.torchprof.conftest import SCRIPTS, gpuscope_run, name_counts, trace_events


@pytest.mark.torch
def test_a_schedule_profiles_the_active_optimizer_steps(run_env):
    requires.torch()
    ran = gpuscope_run(run_env, "--torch-profile", "--torch-profile-schedule", "1,1,2",
                       "--torch-profile-shapes", str(SCRIPTS / "train_loop.py"), "6")
    assert ran.returncode == 0, ran.stderr[-3000:]
    [trace] = ran.traces()
    counts = name_counts(ran.run_dir / trace["path"])
    assert counts["Optimizer.step"] == 2 and counts["aten::addmm"] == 2 * 2
    assert sorted(n for n in counts if n.startswith("ProfilerStep#")) == ["ProfilerStep#2", "ProfilerStep#3"]
    addmm = next(e for e in trace_events(ran.run_dir / trace["path"]) if e["name"] == "aten::addmm")
    assert addmm["args"]["Input Dims"]   # --torch-profile-shapes
    assert trace["clock_offset_ns"] is not None


@pytest.mark.torch
def test_a_schedule_longer_than_the_program_says_so(run_env):
    requires.torch()
    ran = gpuscope_run(run_env, "--torch-profile", "--torch-profile-schedule", "10,1,2",
                       str(SCRIPTS / "train_loop.py"), "3", "5")
    assert ran.returncode == 5
    assert ran.record["torch_traces"] == []
    [note] = [n for n in ran.record["notes"] if n.startswith("torch profiler:")]
    assert note.endswith("the program ended after 3 optimizer steps, before the schedule's first active step ended")


@pytest.mark.torch
def test_ranks_not_chosen_are_not_profiled(run_env):
    requires.torch()
    ran = gpuscope_run(run_env, "--launcher", "torchrun", "--nproc", "2", "--torch-profile",
                       "--torch-profile-ranks", "1", str(SCRIPTS / "ddp_loop.py"), "2")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert [t["rank"] for t in ran.traces()] == [1]
    assert not list((ran.run_dir / "torch").glob("rank0-*"))
    assert name_counts(ran.run_dir / ran.traces()[0]["path"])["Optimizer.step"] == 2


def _interpreters_without_torch() -> list[str]:
    """Other interpreters of this machine that have no torch (the system's, pyenv's newest)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[3-9]*/bin/python3")))
    found = [p for p in ("/usr/bin/python3", *pyenv) if os.access(p, os.X_OK)]
    return [p for p in found if subprocess.run([p, "-c", "import torch"], capture_output=True).returncode != 0]


@pytest.mark.parametrize("python", ["venv", *_interpreters_without_torch()])
def test_without_torch_nothing_happens(run_env, python):
    """The hook in a process that never imports torch, or in an interpreter that has none."""
    interpreter = sys.executable if python == "venv" else python
    args = [] if python == "venv" else ["--python", interpreter]
    with_it = gpuscope_run(run_env, *args, "--torch-profile", str(SCRIPTS / "no_torch.py"), "try" if args else "no")
    without = gpuscope_run(run_env, *args, str(SCRIPTS / "no_torch.py"), "try" if args else "no")
    assert with_it.returncode == without.returncode == 3
    assert with_it.lines == without.lines == ['{"sum": 45, "torch": false}']
    assert with_it.record["torch_traces"] == []
    assert "torch profiler: no process of the run imported torch (nothing profiled)" in with_it.record["notes"]
    assert not (with_it.run_dir / "torch").exists()
    assert "Traceback" not in with_it.stderr


@pytest.mark.parametrize("args, message", [
    (["--torch-profile-ranks", "0"], "the --torch-profile-* options need --torch-profile"),
    (["--torch-profile", "--torch-profile-schedule", "1,x"],
     "--torch-profile-schedule takes whole numbers separated by commas, not '1,x'"),
    (["--torch-profile", "--torch-profile-schedule", "1,1,0"],
     "--torch-profile-schedule takes WAIT,WARMUP,ACTIVE[,REPEAT] optimizer steps (ACTIVE at least 1, none "
     "negative), not 1,1,0"),
    (["--torch-profile", "--torch-profile-ranks", "0,-1"],
     "--torch-profile-ranks takes 'all' or ranks from 0 such as 0,2, not (0, -1)"),
])
def test_bad_options_are_one_line(run_env, args, message):
    done = subprocess.run([sys.executable, "-m", "gpuscope", "run", *args, str(SCRIPTS / "no_torch.py")],
                          env=run_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"gpuscope: error: {message}"]
