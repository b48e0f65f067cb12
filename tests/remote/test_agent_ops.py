"""The agent's ops over stored runs and the machine, and ``exec`` of ``run`` (detached)."""

from __future__ import annotations

import base64
import json
import os
import threading
import time

import pytest

from gpuscope.remote.connection import connect_local
from gpuscope.remote.protocol import RemoteError

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def conn():
    c = connect_local()
    yield c
    c.close()


def exec_run(conn, argv, on_event=None):
    return conn.request("exec", {"argv": ["run", "--json", *argv]}, on_event=on_event, timeout=120)


def test_a_run_by_exec_is_read_back_by_the_ops(conn, tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import os, sys\nprint('uid', os.getuid())\nsys.exit(4)\n")
    out: dict[str, bytes] = {}

    def on_event(kind, data):
        out[kind] = out.get(kind, b"") + base64.b64decode(data["b64"])
    result = exec_run(conn, [str(script)], on_event)
    assert result["code"] == 4 and result["run_id"]
    assert f"uid {os.getuid()}".encode() in out["stdout"]
    run_id = result["run_id"]

    history = conn.request("history", {"limit": 10})
    [row] = history["rows"]
    assert row["id"] == run_id and row["status"] == "failed" and row["exit_code"] == 4
    assert history["sizes"][run_id] > 0 and isinstance(history["series"], list)

    record = conn.request("open_run", {"ref": run_id[:12]})
    assert record["run_id"] == run_id and record["exit_code"] == 4 and record["spec"]["script"] == str(script)
    assert isinstance(conn.request("findings", {"run": run_id}), list)
    stacks = conn.request("stacks", {"run_id": run_id})
    assert stacks == {"taken_ns": None, "live": False, "processes": []}

    summary = conn.request("report_summary", {"run": run_id}, timeout=120)
    assert isinstance(summary, dict) and "processes" in summary
    with pytest.raises(RemoteError, match="no run|not found|No run"):
        conn.request("open_run", {"ref": "29991231-nope"})

    assert conn.request("delete_runs", {"ids": [run_id]})["deleted"] == 1
    assert conn.request("history")["rows"] == []


def test_cancel_of_an_execd_run_is_its_stop(conn, tmp_path):
    script = tmp_path / "long.py"
    script.write_text("import time\nprint('go', flush=True)\ntime.sleep(120)\n")
    started = threading.Event()
    pending = conn.start("exec", {"argv": ["run", "--json", str(script)]},
                         on_event=lambda kind, data: started.set() if b"go" in base64.b64decode(data["b64"]) else None)
    assert started.wait(60)
    t0 = time.monotonic()
    pending.cancel()
    result = pending.wait(60)
    assert result["code"] == 130 and time.monotonic() - t0 < 30
    assert conn.request("open_run", {"ref": result["run_id"]})["status"] == "stopped"
    (tmp_path / "quick.py").write_text("print(1)\n")
    plain = conn.request("exec", {"argv": ["run", str(tmp_path / "quick.py")]}, timeout=120)   # no --json
    assert plain["code"] == 0 and conn.request("open_run", {"ref": plain["run_id"]})["exit_code"] == 0


def test_an_execd_run_outlives_the_connection(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\nfor i in range(10):\n    print(i, flush=True)\n    time.sleep(0.1)\n")
    first = connect_local()
    started = threading.Event()
    first.start("exec", {"argv": ["run", "--json", str(script)]}, on_event=lambda k, d: started.set())
    assert started.wait(60)
    first.close()                                   # the agent exits at end of input; the run goes on
    second = connect_local()
    try:
        deadline = time.monotonic() + 60
        rows: list = []
        while time.monotonic() < deadline:
            rows = second.request("history")["rows"]
            if rows and rows[0]["status"] != "running":
                break
            time.sleep(0.2)
        assert rows and rows[0]["status"] == "exited" and rows[0]["exit_code"] == 0
        log = os.path.join(rows[0]["run_dir"], "stdout.log")
        assert open(log).read().split() == [str(i) for i in range(10)]
    finally:
        second.close()


def test_cleanup_scan_and_apply(conn):
    listing = conn.request("cleanup_scan", {"options": {"use_gpu": False, "idle_window_s": 0}}, timeout=120)
    assert {"suspects", "notes", "gpu_checked"} <= set(listing)
    with pytest.raises(RemoteError, match="not in the last listing"):
        conn.request("cleanup_apply", {"keys": ["no-such-key"]})
    assert conn.request("cleanup_apply", {"keys": []}) == []
    json.dumps(listing)


def test_the_agent_works_without_qt(tmp_path):
    """The remote has no PySide6 or pyqtgraph: the agent and its ops never import them."""
    blocker = tmp_path / "noqt"
    for name in ("PySide6", "pyqtgraph"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    script = tmp_path / "tiny.py"
    script.write_text("print('ok')\n")
    env = dict(os.environ, PYTHONPATH=f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    conn = connect_local(env=env)
    try:
        started = conn.request("start_run", {"spec": {"script": str(script), "cwd": str(tmp_path)}}, timeout=120)
        events: list[str] = []
        conn.request("watch_run", {"run_id": started["run_id"]}, on_event=lambda k, d: events.append(k), timeout=120)
        assert events[-1] == "ended"
        for op, args in (("history", {}), ("open_run", {"ref": started["run_id"]}),
                         ("findings", {"run": started["run_id"]}), ("stacks", {"run_id": started["run_id"]}),
                         ("report_summary", {"run": started["run_id"]}), ("active_runs", {}),
                         ("cleanup_scan", {"options": {"use_gpu": False, "idle_window_s": 0}})):
            conn.request(op, args, timeout=120)
        with pytest.raises(RemoteError, match="window runs on the workstation"):
            conn.request("exec", {"argv": ["gui"]})
    finally:
        conn.close()


def test_compare_stop_process_and_main_exited(conn, tmp_path):
    from gpuscope.analysis.comparison import Comparison

    script = tmp_path / "quick.py"
    script.write_text("import time\ntime.sleep(0.2)\n")
    ids = [exec_run(conn, [str(script)])["run_id"] for _ in range(2)]
    data = conn.request("compare_runs", {"ids": ids}, timeout=120)
    comparison = Comparison.from_dict(data)
    assert comparison.to_dict() == data and comparison.labels and comparison.metric("wall_s") is not None

    long = tmp_path / "long.py"
    long.write_text("import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    started = conn.request("start_run", {"spec": {"script": str(long), "cwd": str(tmp_path)}}, timeout=120)
    up = threading.Event()
    ended: list[dict] = []
    pending = conn.start("watch_run", {"run_id": started["run_id"]},
                         on_event=lambda k, d: up.set() if k == "output" else ended.append(d) if k == "ended" else None)
    assert up.wait(60)
    assert conn.request("main_exited", {"run_dir": started["run_dir"]}) is False
    result = conn.request("stop_process", {"pid": started["program_pid"], "grace_s": 2, "run_id": started["run_id"]},
                          timeout=60)
    assert result["ok"], result
    assert pending.wait(60) == {} and ended and ended[0]["signal"] == "SIGTERM"
    finished = conn.request("open_run", {"ref": ids[0]})["run_dir"]
    assert conn.request("main_exited", {"run_dir": finished}) is True


@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK), reason="no system python3 to stand for the remote's")
def test_runs_use_the_remotes_python_not_the_agents(tmp_path):
    """The bootstrap names the remote's python3 (GPUSCOPE_USER_PYTHON); runs without --python use it."""
    system = "/usr/bin/python3"
    script = tmp_path / "which.py"
    script.write_text("import sys\nprint('exe', sys.executable)\n")
    conn = connect_local(env=dict(os.environ, GPUSCOPE_USER_PYTHON=system))
    try:
        assert conn.hello["python_path"] == system
        out: list[bytes] = []
        conn.request("exec", {"argv": ["run", str(script)]},
                     on_event=lambda k, d: out.append(base64.b64decode(d["b64"])) if k == "stdout" else None,
                     timeout=120)
        assert f"exe {system}".encode() in b"".join(out)
        started = conn.request("start_run", {"spec": {"script": str(script), "cwd": str(tmp_path)}}, timeout=120)
        got: list[bytes] = []
        conn.request("watch_run", {"run_id": started["run_id"]},
                     on_event=lambda k, d: got.append(base64.b64decode(d["b64"])) if k == "output" else None,
                     timeout=120)
        assert f"exe {system}".encode() in b"".join(got)
        assert conn.request("open_run", {"ref": started["run_id"]})["spec"]["python"] == system
    finally:
        conn.close()


def test_roles_of_a_runs_processes(conn, tmp_path):
    from gpuscope.views.procroles import RoleReader

    script = tmp_path / "pool2.py"
    script.write_text("import multiprocessing as mp\ndef f(x):\n    return x\nif __name__ == '__main__':\n"
                      "    with mp.get_context('spawn').Pool(2) as p:\n        p.map(f, range(4))\n")
    run_id = exec_run(conn, [str(script)])["run_id"]
    run_dir = conn.request("open_run", {"ref": run_id})["run_dir"]
    got = conn.request("roles", {"run_dir": run_dir}, timeout=60)
    identities, exits = RoleReader(run_dir).read()
    assert got["identities"] == {str(pid): {"role": i.role, "rank": i.rank, "start_method": i.start_method,
                                            "worker_id": i.worker_id} for pid, i in identities.items()}
    assert got["exits"] == {str(pid): code for pid, code in exits.items()}
    assert sorted(i["role"] for i in got["identities"].values()).count("main") == 1 and len(got["identities"]) >= 3
    with pytest.raises(RemoteError, match="no run folder"):
        conn.request("roles", {"run_dir": str(tmp_path / "nope")})


def test_series_of_a_stored_run(conn, tmp_path):
    import numpy as np

    from gpuscope.remote.timelineops import decode_column
    from gpuscope.store.db import connect
    from gpuscope.telemetry.series import load_series

    script = tmp_path / "sleepy.py"
    script.write_text("import time\nx = bytearray(20 << 20)\ntime.sleep(0.8)\n")
    run_id = exec_run(conn, [str(script)])["run_id"]
    got = conn.request("series", {"run_id": run_id}, timeout=60)
    store = connect()
    try:
        want = load_series(store, run_id)
    finally:
        store.close()
    assert want is not None and got["run_id"] == run_id and got["interval_s"] == want["interval_s"]
    assert np.array_equal(decode_column(got["host"]["t_ns"]), want["host"]["t_ns"])
    assert set(got["processes"]) == {str(pid) for pid in want["processes"]}
    for pid, cols in want["processes"].items():
        for name, column in cols.items():
            sent = decode_column(got["processes"][str(pid)][name])
            assert np.array_equal(sent, column, equal_nan=column.dtype.kind == "f"), name
    assert len(decode_column(got["host"]["t_ns"])) >= 3
