"""The agent's ``compare_series`` over a real agent (``connect_local``): a fork vs spawn series of a
tiny script comes back compared, its runs and the series in the agent's store, its live events on
the way; a cancel ends the series."""

from __future__ import annotations

import base64
import os
import time

import pytest

from gpuscope.analysis.comparison import Comparison
from gpuscope.remote.connection import connect_local
from gpuscope.spec import RunSpec

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def conn(tmp_path):
    env = dict(os.environ, GPUSCOPE_HOME=str(tmp_path / "agent-home"))
    c = connect_local(env=env)
    yield c
    c.close()


def _spec(tmp_path, body: str, *args: str) -> dict:
    path = tmp_path / "tiny.py"
    path.write_text(body)
    return RunSpec(script=str(path), args=args).to_dict()


def test_a_series_comes_back_compared_and_stored_there(conn, tmp_path):
    spec = _spec(tmp_path, "import multiprocessing as mp\nprint('method', mp.get_start_method())\n")
    events: list[tuple[str, object]] = []
    res = conn.request("compare_series", {"spec": spec, "methods": ["fork", "spawn"], "repeat": 1},
                       on_event=lambda kind, data: events.append((kind, data)), timeout=150)
    cmp = Comparison.from_dict(res)
    assert cmp.labels == ["fork", "spawn"] and [len(cmp.runs[m]) for m in cmp.labels] == [1, 1]
    steps = [(d["i"], d["n"], d["method"], d["repeat"]) for k, d in events if k == "step"]
    assert steps == [(1, 2, "fork", 1), (2, 2, "spawn", 1)]
    started = [d["run_id"] for k, d in events if k == "started"]
    assert started == [cmp.runs["fork"][0], cmp.runs["spawn"][0]]
    assert all(d["pid"] > 0 and d["run_dir"].endswith(d["run_id"]) for k, d in events if k == "started")
    out = b"".join(base64.b64decode(d["b64"]) for k, d in events if k == "output" and d["stream"] == "stdout")
    assert b"method fork" in out and b"method spawn" in out
    history = conn.request("history", {"limit": 10})
    assert {r["id"] for r in history["rows"]} == set(started)
    [entry] = history["series"]
    assert entry["runs"] == cmp.runs


def test_a_cancel_ends_the_series(conn, tmp_path):
    # the first run ends at once, the next ones sleep: a cancel stops the second
    body = "import os, sys, time\nif os.path.exists(sys.argv[1]):\n    time.sleep(60)\nopen(sys.argv[1], 'w').close()\n"
    spec = _spec(tmp_path, body, str(tmp_path / "flag"))
    started: list[str] = []
    steps: list[object] = []
    progress: list[str] = []

    def on_event(kind, data):
        if kind == "step":
            steps.append(data)
        elif kind == "started":
            started.append(data["run_id"])
        elif kind == "progress":
            progress.append(data["text"])
    pending = conn.start("compare_series", {"spec": spec, "methods": ["fork", "spawn"], "repeat": 2}, on_event)
    deadline = time.monotonic() + 90
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(started) == 2
    t0 = time.monotonic()
    pending.cancel()
    cmp = Comparison.from_dict(pending.wait(60))
    assert time.monotonic() - t0 < 30 and len(steps) == 2      # no further run started
    assert cmp.runs == {"fork": [started[0]], "spawn": [started[1]]}
    assert "stopped" in cmp.left_out[started[1]]
    # the run's own progress lines come as events, saying which run of the series they are about
    assert any(t.startswith("run 2 of 4: spawn, repeat 1 · stopping") for t in progress), progress
    history = conn.request("history", {"limit": 10})
    assert {r["id"] for r in history["rows"]} == set(started)
    assert all(r["status"] != "running" for r in history["rows"])
    assert history["series"][0]["runs"] == cmp.runs
