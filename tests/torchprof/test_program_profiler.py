"""A program that runs torch.profiler itself keeps it: gpuscope's steps aside (saving what it had),
the program's exported traces are collected into the run, and its output is unchanged."""

from __future__ import annotations

import gzip
import json

import pytest

from tests import requires
from tests.torchprof.conftest import SCRIPTS, gpuscope_run, name_counts


@pytest.mark.torch
def test_the_programs_profiler_works_and_its_traces_are_collected(run_env, tmp_path):
    requires.torch()
    mine, plain = tmp_path / "with", tmp_path / "without"
    mine.mkdir()
    plain.mkdir()
    ran = gpuscope_run(run_env, "--torch-profile", str(SCRIPTS / "own_profiler.py"), str(mine))
    without = gpuscope_run(run_env, str(SCRIPTS / "own_profiler.py"), str(plain))
    assert ran.returncode == without.returncode == 0, ran.stderr[-3000:]
    assert ran.lines == without.lines == ["True False"]   # its own table: its label, nothing of gpuscope's
    written = sorted(p.relative_to(mine).as_posix() for p in mine.rglob("*") if p.is_file())
    assert written[0] == "mine.json" and written[1].startswith("tb/w.") and len(written) == 2
    programs = ran.traces("program")
    assert len(programs) == 2
    for entry in programs:
        copy = ran.run_dir / entry["path"]
        with gzip.open(copy, "rt", encoding="utf-8") as fh:
            assert json.load(fh)["traceEvents"]
        assert entry["clock_method"] == "realtime" and entry["clock_offset_ns"] is not None
    assert name_counts(ran.run_dir / programs[0]["path"])["proc_0_step"] == 1
    # gpuscope's own trace: the two steps before the program's profiler started
    own = ran.traces()
    assert len(own) == 1 and name_counts(ran.run_dir / own[0]["path"])["Optimizer.step"] == 2
    assert any("stopped when the program started its own" in n for n in ran.record["notes"])


@pytest.mark.torch
def test_a_profiler_the_program_never_stopped_is_saved_at_exit(run_env):
    requires.torch()
    ran = gpuscope_run(run_env, "--torch-profile", str(SCRIPTS / "unstopped.py"))
    assert ran.returncode == 0 and ran.lines == ["trained"], ran.stderr[-3000:]
    [program] = ran.traces("program")
    assert name_counts(ran.run_dir / program["path"])["Optimizer.step"] == 3
    assert sorted(p.name for p in (ran.run_dir / "torch").iterdir() if "unstopped" in p.name) == []
    assert any("still running at exit: gpuscope stopped it and saved its trace" in n for n in ran.record["notes"])
