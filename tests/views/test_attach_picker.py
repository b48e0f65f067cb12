"""The attach picker's model and the flame graph's layout, without Qt.

The picker reads the real process table (a spawn pool started here, outside gpuscope); the flame
graph reads a speedscope file in the shape py-spy ``record --subprocesses`` writes (one profile per
thread, each stack rooted in its process chain)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gpuscope.attach.candidates import list_trees
from gpuscope.attach.profile import Profile, TopFunction
from gpuscope.attach.view import AttachedProcess, AttachView
from gpuscope.views import attach_flame, attach_picker

pytestmark = pytest.mark.timeout(120)

POOL = """
import multiprocessing as mp, time
if __name__ == "__main__":
    mp.set_start_method("spawn")
    with mp.Pool(2) as pool:
        pool.map(time.sleep, [0.01, 0.01])
        print("ready", flush=True)
        time.sleep(600)
"""


def test_picker_lists_the_job_and_keeps_the_choice_until_it_ends(tmp_path):
    script = tmp_path / "picked_job.py"
    script.write_text(POOL)
    job = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert job.stdout is not None and job.stdout.readline().strip() == "ready"
        model = attach_picker.PickerModel()
        model.update(list_trees())
        i = model.index_of(job.pid)
        assert i is not None, [r.cells for r in model.rows]
        row = model.rows[i]
        assert row.cells[0] == str(job.pid) and row.kind == "multiprocessing parent"
        assert int(row.cells[4]) == 4 and row.keys[4] == 4          # parent, 2 workers, resource tracker
        assert "picked_job.py" in row.cells[2] and str(script) in row.tooltip
        assert row.cells[6].endswith("MiB") and row.cells[7] == "—"      # RSS read; no GPU reading here
        model.choose(job.pid)
        model.update(list_trees())
        assert model.chosen == job.pid
        assert "Python job(s)" in model.status_line()
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
    deadline = time.monotonic() + 30
    while model.chosen is not None:                 # its workers go once the parent is gone
        assert time.monotonic() < deadline
        model.update(list_trees())
        time.sleep(0.1)
    assert model.index_of(job.pid) is None
    model.choose(job.pid)
    assert model.chosen is None                     # a job not listed cannot be chosen


def test_cells_read_well():
    assert attach_picker.age_text(42.9) == "42 s"
    assert attach_picker.age_text(245) == "4 min 05 s"
    assert attach_picker.age_text(6 * 3600 + 12 * 60) == "6 h 12 min"
    assert attach_picker.size_text(None) == "—" and attach_picker.size_text(300 << 20) == "300 MiB"
    assert attach_picker.size_text(12 << 30) == "12.0 GiB"
    long = ("/very/long/interpreter/path/bin/python3", "/home/someone/projects/deep/folder/train_job.py",
            "--config", "/home/someone/projects/deep/folder/configs/a_rather_long_config_name.yaml")
    text = attach_picker.command_text(long, limit=60)
    assert text.startswith("…/python3 …/train_job.py --config") and len(text) <= 60 and "'" not in text
    model = attach_picker.PickerModel()
    model.update([])
    assert "no Python job" in model.status_line()
    model.failed("permission denied")
    assert model.status_line() == "could not list processes: permission denied"


def _view() -> AttachView:
    procs = [AttachedProcess(10, 1, "main", None, ("python", "job.py"), 1.0, 1 << 20, None, "sleeping"),
             AttachedProcess(11, 10, "pool worker", None, ("python", "-c", "..."), 2.0, 1 << 20, None, "running"),
             AttachedProcess(12, 10, "pool worker", None, ("python", "-c", "..."), 2.0, 1 << 20, None, "running"),
             AttachedProcess(13, 10, "rank", 1, ("python",), 0.0, 0, None, "ended", alive=False)]
    return AttachView("run-1", 10, procs)


def test_view_lines_and_identities():
    view = _view()
    ids = attach_picker.identities(view)
    assert ids[11].role == "pool worker" and ids[13].rank == 1 and ids[10].worker_id is None
    assert attach_picker.state_line(view) == "following 3 process(es): 2 pool worker, main"
    assert attach_picker.state_line(view, idle_s=12).endswith("; no CPU for 12 s")
    assert attach_picker.title_text(view) == "attached: python job.py · pid 10 · run run-1"
    view.ended = True
    assert attach_picker.state_line(view) == "the job has ended (4 process(es) seen)"


def test_top_rows_put_the_busiest_role_first():
    prof = Profile("/x/profile.speedscope.json", 5.0, 30, {
        "main": [TopFunction("wait", "/usr/lib/python3/threading.py", 320, 5, 1.0)],
        "pool worker": [TopFunction("burn", "/job/job.py", 6, 20, 0.8), TopFunction("work", "/job/job.py", 9, 5, 0.2)],
    }, {10: 5, 11: 25})
    rows = attach_picker.top_rows(prof)
    assert [(r.role, r.function, r.where) for r in rows] == [
        ("pool worker", "burn", "job.py:6"), ("pool worker", "work", "job.py:9"), ("main", "wait", "threading.py:320")]
    assert attach_picker.profile_line(prof).startswith("30 samples of 2 process(es) in 5 s")
    assert attach_picker.profile_line(Profile("p", 5.0, note="py-spy exit status 1")) == \
        "no samples: py-spy exit status 1"


def _speedscope(path) -> None:
    frames = [{"name": 'process 10:"python job.py"', "file": "", "line": 0},
              {"name": 'process 11:"python -c ..."', "file": "", "line": 0},
              {"name": "<module>", "file": "job.py", "line": 1},
              {"name": "burn", "file": "job.py", "line": 6},
              {"name": "wait", "file": "threading.py", "line": 320}]
    profiles = [
        {"type": "sampled", "name": 'Process 10 Thread 10 "MainThread"', "unit": "seconds",
         "samples": [[0, 2, 4]] * 2, "weights": [0.01] * 2},
        {"type": "sampled", "name": 'Process 11 Thread 11 "MainThread"', "unit": "seconds",
         "samples": [[0, 1, 2, 3]] * 6, "weights": [0.01] * 6},
    ]
    path.write_text(json.dumps({"shared": {"frames": frames}, "profiles": profiles}))


def test_flame_layout_nests_callees_under_callers(tmp_path):
    path = tmp_path / "profile.speedscope.json"
    _speedscope(path)
    samples = attach_flame.load(str(path))
    assert samples.total == 8 and [p.pid for p in samples.processes] == [10, 11]
    boxes = attach_flame.layout(samples, {10: "main", 11: "pool worker"})
    assert not any(b.name.startswith("process ") for b in boxes)       # py-spy's process chain left out
    tops = [b for b in boxes if b.depth == 0]
    assert [(b.name, b.samples) for b in tops] == [("pool worker", 6), ("main", 2)]
    assert tops[0].x == 0 and tops[1].x == pytest.approx(0.75) and sum(b.width for b in tops) == pytest.approx(1)
    for b in boxes:                        # every box lies inside a box of the row above, same top
        if b.depth:
            assert any(a.depth == b.depth - 1 and a.top == b.top and a.x <= b.x + 1e-9
                       and b.x + b.width <= a.x + a.width + 1e-9 for a in boxes)
    burn = next(b for b in boxes if b.name == "burn")
    assert (burn.depth, burn.samples, burn.top) == (2, 6, "pool worker")
    assert attach_flame.depth_of(boxes) == 3
    assert attach_flame.box_at(boxes, 0.8, 1).name == "<module>"
    assert attach_flame.box_at(boxes, 0.8, 2).name == "wait"
    # one label for both: their <module> frames merge
    merged = attach_flame.layout(samples, {10: "job", 11: "job"})
    assert [(b.name, b.samples) for b in merged if b.depth == 1] == [("<module>", 8)]
    assert attach_flame.layout(samples, pids={10})[0].samples == 2
    assert attach_flame.load(str(tmp_path / "missing.json")).total == 0
