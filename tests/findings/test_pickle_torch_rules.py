"""Rules on what the injected hook records of multiprocessing's pickling and of torch, each on real
runs through the real CLI (`gpuscope run --json`), with a trigger and clean scripts:

- ``large-pickles``: a fork pool whose tasks carry 8 MB each (trigger); the same data through
  shared memory (clean); the pool and spawn examples of test_rules.py stay clean too;
- ``cuda-after-fork``: there is no GPU here, so the trigger uses a TEST DOUBLE of torch
  (scripts/gpu_double/, put on sys.path by the script only); the real torch on this CPU machine
  (CUDA never initialised, its init error passed through unchanged) is the clean one;
- ``sampler-epoch-not-set``: a shuffling DistributedSampler over three epochs without and with
  ``set_epoch`` (real torch).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.findings.engine import analyse_run
from gpuscope.trace.events import read_run_events
from tests import requires
from tests.findings.live import SCRIPTS
from tests.runs.helpers import gpuscope, summary


def _run(*args, env) -> tuple[dict, dict, str]:
    proc = gpuscope("run", "--json", "-q", *map(str, args), env=env, timeout=280)
    data = summary(proc)
    return data, {f.code: f for f in analyse_run(Path(data["run_dir"]))}, proc.stdout.decode()


def test_large_pickles_with_the_numbers(run_env):
    data, found, out = _run(SCRIPTS / "big_pickles.py", env=run_env)
    assert "sum 134217728" in out                               # the program's result is unchanged
    f = found["large-pickles"]
    ev = f.evidence
    assert 134 <= ev.number("MB pickled") < 140, ev            # 16 × 8 MiB of arguments, and small results
    assert ev.number("tasks") == 16 and 8.3 <= ev.number("MB per task") < 8.8
    assert ev.number("largest MB") == pytest.approx(8.39, abs=0.05) and ev.number("MB per s of run") > 0
    main = next(p["pid"] for p in data["processes"] if p["role"] == "main")
    assert f.pids == (main,) and f.title.startswith(f"{ev.number('MB pickled'):.0f} MB pickled")
    assert "shared_memory" in f.fix
    assert set(found) == {"large-pickles"}


def test_shared_memory_instead_of_pickles_is_clean(run_env):
    data, found, out = _run(SCRIPTS / "shm_pass.py", env=run_env)
    assert data["status"] == "exited" and "sum 134217728" in out
    assert found == {}, [f.line() for f in found.values()]
    main = next(pe for pe in read_run_events(data["run_dir"]) if pe.role == "main")
    assert main.pickled and 0 < main.pickled["bytes"] < 1_000_000, main.pickled   # counted, and small


def test_cuda_after_fork_names_the_call_that_initialised_cuda_test_double(run_env):
    data, found, out = _run(SCRIPTS / "cuda_fork_double.py", env=run_env)
    assert "sum 28" in out
    f = found["cuda-after-fork"]
    main = next(p["pid"] for p in data["processes"] if p["role"] == "main")
    site = f"{SCRIPTS / 'cuda_fork_double.py'}:14 in <module>"
    assert f.pids == (main,) and site in f.title and f.evidence.excerpts[0] == f"CUDA initialised by {site}"
    assert f.evidence.number("forks after CUDA init") == 2              # the pool's two workers
    assert f.action.method == "spawn" and f.severity == "warning"       # no child failed: a hazard
    assert set(found) == {"cuda-after-fork"}


def test_dataloader_workers_forked_after_cuda_are_no_finding_test_double(run_env):
    """A DataLoader forking its workers after CUDA is up is the usual, working pattern (workers that
    never touch CUDA): counted apart in the record, no finding unless a child fails."""
    data, found, out = _run(SCRIPTS / "cuda_fork_double.py", "dataloader", env=run_env)
    assert "workers [0, 0]" in out
    assert found == {}, [f.line() for f in found.values()]
    main = next(pe for pe in read_run_events(data["run_dir"]) if pe.role == "main")
    assert main.cuda_at_fork["dataloader_forks"] == 2 and main.cuda_at_fork["forks"] == 0, main.cuda_at_fork


def test_real_torch_without_cuda_is_clean_and_its_error_unchanged(run_env):
    requires.torch()
    data, found, out = _run(SCRIPTS / "cuda_fork_cpu_torch.py", env=run_env)
    assert "cuda init failed: AssertionError Torch not compiled with CUDA enabled" in out, out
    assert "initialized False" in out and "sum 28" in out
    assert found == {}, [f.line() for f in found.values()]


def test_sampler_epoch_not_set(run_env):
    requires.torch()
    data, found, out = _run(SCRIPTS / "sampler_epochs.py", env=run_env)
    firsts = [line.split("first ", 1)[1] for line in out.splitlines() if line.startswith("epoch")]
    assert len(firsts) == 3 and len(set(firsts)) == 1                  # the bug itself: the same order
    f = found["sampler-epoch-not-set"]
    assert f.evidence.number("repeated epochs") == 2 and "set_epoch" in f.fix
    assert f"{SCRIPTS / 'sampler_epochs.py'}:17" in f.title
    assert set(found) == {"sampler-epoch-not-set"}


def test_sampler_with_set_epoch_is_clean(run_env):
    requires.torch()
    data, found, out = _run(SCRIPTS / "sampler_epochs.py", "set", env=run_env)
    firsts = [line.split("first ", 1)[1] for line in out.splitlines() if line.startswith("epoch")]
    assert len(set(firsts)) == 3
    assert found == {}, [f.line() for f in found.values()]
    main = next(pe for pe in read_run_events(data["run_dir"]) if pe.role == "main")
    assert main.sampler_epochs["epochs"] == [0, 1, 2] and main.sampler_epochs["repeats"] == 0


def test_counting_pickles_changes_neither_the_bytes_nor_the_errors(run_env):
    import subprocess
    import sys

    script = SCRIPTS / "pickle_same.py"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120, env=run_env)
    proc = gpuscope("run", "--json", "-q", str(script), env=run_env, timeout=280)
    out = proc.stdout.decode()
    assert plain.stdout.decode() in out and "error TypeError" in out and "wrapped name dumps" in out, out
    main = next(pe for pe in read_run_events(summary(proc)["run_dir"]) if pe.role == "main")
    assert main.pickled["calls"] == 3, main.pickled             # the failed call pickled nothing


def test_cuda_fork_record_and_the_child_error_make_one_error():
    """On a GPU the fork children fail with torch's message too (scripts/gpu_smoke.py runs it for
    real); here the two parts: a parsed record and the stderr scanner fed torch's text."""
    from gpuscope.findings import torch_rules
    from gpuscope.findings.output_rules import OutputScanner
    from gpuscope.trace.events import ProcessEvents

    scanner = OutputScanner()
    scanner.feed(b"Traceback (most recent call last):\n  File \"/job/train.py\", line 9, in child\n"
                 b"RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                 b"you must use the 'spawn' start method\n")
    scanner.finish()
    record = {"t_wall_ns": 1, "init_site": "/job/train.py:4 in <module>", "forks": 1}
    pe = ProcessEvents(Path("/x/7-1.log"), {"pid": 7, "role": "main", "anchor_mono_ns": 0},
                       {"role": "main", "cuda_at_fork": record})
    output = scanner.findings()
    found = torch_rules.merge_cuda_message(output + torch_rules.cuda_after_fork([pe], output))
    [f] = found
    assert f.pids == (7,) and f.severity == "error" and "(by /job/train.py:4 in <module>)" in f.title
    assert f.evidence.number("children that failed") == 1
    assert any("Cannot re-initialize CUDA" in line for line in f.evidence.excerpts)
    assert torch_rules.merge_cuda_message(output) == output          # the message alone stays a finding


def _pickling_process(seconds_of_run: float, total: int, largest: int):
    from gpuscope.trace.events import ProcessEvents

    pe = ProcessEvents(Path("/x/1-1.log"), {"pid": 1, "role": "main", "anchor_mono_ns": 0},
                       {"role": "main", "pickled": {"bytes": total, "calls": 100, "max_bytes": largest,
                                                    "seconds": 1.0}})
    pe.end_ns = int(seconds_of_run * 1e9)
    return pe


@pytest.mark.parametrize("span_s, total, largest, fires", [
    (3600, 10_000_000_000, 1_000_000, False),     # 10 GB over an hour, 1 MB at a time: 2.8 MB/s, negligible
    (3600, 200_000_000, 80_000_000, True),        # one 80 MB object
    (2, 200_000_000, 1_000_000, True),            # 100 MB/s
    (2, 90_000_000, 1_000_000, False),            # under 100 MB in all
], ids=["slow-long-job", "one-large-object", "fast", "small"])
def test_large_pickles_thresholds(span_s, total, largest, fires):
    from gpuscope.findings.ipc_rules import large_pickles

    assert bool(large_pickles([_pickling_process(span_s, total, largest)])) is fires
