"""Detached runs over a local agent: start, watch, the agent killed mid-run and a new one
re-attaching (no output line lost or doubled), stop, a run that ended while nobody watched."""

from __future__ import annotations

import base64
import os
import textwrap
import threading
import time

import pytest

from gpuscope.remote.batchcodec import BatchReader
from gpuscope.remote.connection import connect_local
from gpuscope.remote.protocol import ConnectionLostError, RemoteError
from gpuscope.remote.runindex import Entry, active_entries, add_entry
from gpuscope.spec import RunSpec
from gpuscope.telemetry.batch import SampleBatch

pytestmark = pytest.mark.timeout(180)


def counting_script(tmp_path, lines: int, pause: float, code: int = 3):
    path = tmp_path / "count.py"
    path.write_text(textwrap.dedent(f"""
        import sys, time
        for i in range({lines}):
            print(f"line {{i}}", flush=True)
            if i % 5 == 0:
                print(f"err {{i}}", file=sys.stderr, flush=True)
            time.sleep({pause})
        sys.exit({code})
    """))
    return RunSpec(script=str(path), cwd=str(tmp_path)).to_dict()


class Watch:
    """What a watcher got: output per stream (with offsets checked to follow on), batches, ended."""

    def __init__(self, offsets: dict[str, int] | None = None) -> None:
        self.out = {"stdout": b"", "stderr": b""}
        self.start = dict(offsets or {"stdout": 0, "stderr": 0})
        self.batches: list[SampleBatch] = []
        self.ended: dict | None = None
        self.got_line = threading.Event()
        self.reader = BatchReader()

    def __call__(self, kind: str, data) -> None:
        if kind == "output":
            name = data["stream"]
            assert data["offset"] == self.start[name] + len(self.out[name]), "a gap or an overlap"
            self.out[name] += base64.b64decode(data["b64"])
            self.got_line.set()
        elif kind == "batch":
            plain = self.reader.expand(data)    # the same as data unless the watch is compact
            batch = SampleBatch.from_dict(plain)
            assert batch.to_dict() == plain
            self.batches.append(batch)
        elif kind == "ended":
            self.ended = data

    def offsets(self) -> dict[str, int]:
        return {name: self.start[name] + len(data) for name, data in self.out.items()}


def wait_gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def conn():
    c = connect_local()
    yield c
    c.close()


def test_start_and_watch_streams_output_batches_and_ended(conn, tmp_path):
    started = conn.request("start_run", {"spec": counting_script(tmp_path, 15, 0.1)}, timeout=120)
    assert os.path.isdir(started["run_dir"])
    [active] = conn.request("active_runs")
    assert active["run_id"] == started["run_id"]
    assert active["program_pid"] == started["program_pid"] and active["program_pid"] != active["pid"]
    watch = Watch()
    assert conn.request("watch_run", {"run_id": started["run_id"]}, on_event=watch, timeout=120) == {}
    assert watch.out["stdout"] == b"".join(f"line {i}\n".encode() for i in range(15))
    assert watch.out["stderr"] == b"err 0\nerr 5\nerr 10\n"
    assert watch.batches and [b.seq for b in watch.batches] == sorted({b.seq for b in watch.batches})
    assert watch.ended is not None and watch.ended["exit_code"] == 3 and watch.ended["run_id"] == started["run_id"]
    assert started["program_pid"] in [p["pid"] for p in watch.ended["processes"]]
    assert wait_gone(active["pid"]), "the run's host process outlived the run"
    assert conn.request("active_runs") == []


@pytest.mark.parametrize("drop", ["kill", "close"])
def test_the_agent_killed_mid_run_the_run_goes_on_and_is_reattached(tmp_path, drop):
    first = connect_local()
    started = first.request("start_run", {"spec": counting_script(tmp_path, 40, 0.1, code=5)}, timeout=120)
    watch = Watch()
    pending = first.start("watch_run", {"run_id": started["run_id"]}, on_event=watch)
    assert watch.got_line.wait(60)
    time.sleep(0.5)
    if drop == "kill":
        first.proc.kill()                          # the link drops: no goodbye
    else:
        first.close()                              # end of input: the agent ends its streams and exits
    with pytest.raises(ConnectionLostError):
        pending.wait(30)
    first.close()
    assert first.proc.returncode is not None
    got_before = watch.offsets()
    assert b"line 39" not in watch.out["stdout"]
    time.sleep(0.5)                                # output the new watcher must fill in from the logs
    second = connect_local()
    try:
        [active] = second.request("active_runs")
        assert active["run_id"] == started["run_id"]
        rest = Watch(got_before)
        second.request("watch_run", {"run_id": started["run_id"], "offsets": got_before}, on_event=rest,
                       timeout=120)
    finally:
        second.close()
    whole = watch.out["stdout"] + rest.out["stdout"]
    assert whole == b"".join(f"line {i}\n".encode() for i in range(40)), "a line lost or doubled"
    assert watch.out["stderr"] + rest.out["stderr"] == b"".join(f"err {i}\n".encode() for i in range(0, 40, 5))
    assert rest.ended is not None and rest.ended["exit_code"] == 5
    assert wait_gone(active["pid"])


def test_a_run_that_ended_unwatched_answers_from_its_folder(conn, tmp_path):
    started = conn.request("start_run", {"spec": counting_script(tmp_path, 3, 0.01, code=0)}, timeout=120)
    deadline = time.monotonic() + 60
    while conn.request("active_runs") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert conn.request("active_runs") == []
    watch = Watch({"stdout": 7, "stderr": 0})
    conn.request("watch_run", {"run_id": started["run_id"], "offsets": {"stdout": 7}}, on_event=watch, timeout=60)
    assert watch.out["stdout"] == b"line 1\nline 2\n"       # from offset 7: "line 0\n" was seen
    assert watch.ended is not None and watch.ended["status"] == "exited" and watch.ended["exit_code"] == 0


def test_stop_run_stops_it_and_watchers_get_ended(conn, tmp_path):
    started = conn.request("start_run", {"spec": counting_script(tmp_path, 600, 0.1)}, timeout=120)
    watch = Watch()
    pending = conn.start("watch_run", {"run_id": started["run_id"]}, on_event=watch)
    assert watch.got_line.wait(60)
    conn.request("stop_run", {"run_id": started["run_id"]}, timeout=30)
    assert pending.wait(60) == {}
    assert watch.ended is not None and watch.ended["status"] == "stopped"
    with pytest.raises(RemoteError, match="is not running on this host"):
        conn.request("stop_run", {"run_id": started["run_id"]})


def test_cancel_ends_the_watch_not_the_run(conn, tmp_path):
    started = conn.request("start_run", {"spec": counting_script(tmp_path, 30, 0.1, code=0)}, timeout=120)
    watch = Watch()
    pending = conn.start("watch_run", {"run_id": started["run_id"]}, on_event=watch)
    assert watch.got_line.wait(60)
    pending.cancel()
    assert pending.wait(10) == {"cancelled": True}
    assert watch.ended is None
    assert [r["run_id"] for r in conn.request("active_runs")] == [started["run_id"]]
    rest = Watch(watch.offsets())
    conn.request("watch_run", {"run_id": started["run_id"], "offsets": watch.offsets()}, on_event=rest, timeout=60)
    assert watch.out["stdout"] + rest.out["stdout"] == b"".join(f"line {i}\n".encode() for i in range(30))


def test_a_bad_spec_is_one_line_and_a_stale_entry_is_ignored(conn, tmp_path):
    with pytest.raises(RemoteError, match="not found") as err:
        conn.request("start_run", {"spec": RunSpec(script=str(tmp_path / "nope.py")).to_dict()}, timeout=60)
    assert "\n" not in str(err.value)
    add_entry(Entry(run_id="20000101-000000-dead", run_dir=str(tmp_path), started_ns=1, pid=2 ** 22 + 7,
                    socket=str(tmp_path / "gone.sock")))
    assert conn.request("active_runs") == []
    assert active_entries() == []
    with pytest.raises(RemoteError):
        conn.request("watch_run", {"run_id": "20000101-000000-dead"}, timeout=60)


def test_two_watchers_on_two_connections_get_the_same_stream(tmp_path):
    first, second = connect_local(), connect_local()
    try:
        started = first.request("start_run", {"spec": counting_script(tmp_path, 20, 0.05, code=0)}, timeout=120)
        watches = [Watch(), Watch()]
        pendings = [c.start("watch_run", {"run_id": started["run_id"], "compact": i == 1}, on_event=w)
                    for i, (c, w) in enumerate(zip((first, second), watches))]
        assert all(p.wait(120) == {} for p in pendings)
    finally:
        first.close()
        second.close()
    want = b"".join(f"line {i}\n".encode() for i in range(20))
    assert [w.out["stdout"] for w in watches] == [want, want]
    assert all(w.ended is not None and w.ended["exit_code"] == 0 for w in watches)


def test_a_flood_of_output_arrives_whole_and_in_order(tmp_path):
    path = tmp_path / "flood.py"
    path.write_text("import sys\nline = b'x' * 99 + b'\\n'\nfor i in range(160_000):\n"
                    "    sys.stdout.buffer.write(b'%07d' % i + line)\n")
    conn = connect_local()
    try:
        started = conn.request("start_run", {"spec": RunSpec(script=str(path), cwd=str(tmp_path)).to_dict()},
                               timeout=120)
        watch = Watch()
        conn.request("watch_run", {"run_id": started["run_id"]}, on_event=watch, timeout=170)
    finally:
        conn.close()
    with open(os.path.join(started["run_dir"], "stdout.log"), "rb") as fh:
        assert watch.out["stdout"] == fh.read()
    assert len(watch.out["stdout"]) == 160_000 * 107


def test_a_run_without_a_host_is_followed_through_its_logs(tmp_path):
    """A run exec'd on the remote (no run host) is watched from another connection until it ends."""
    path = tmp_path / "unhosted.py"
    path.write_text("import sys, time\nfor i in range(20):\n    print(f'line {i}', flush=True)\n"
                    "    time.sleep(0.1)\nsys.exit(6)\n")
    first, second = connect_local(), connect_local()
    try:
        execd = first.start("exec", {"argv": ["run", str(path)]})
        deadline = time.monotonic() + 60
        rows: list = []
        while time.monotonic() < deadline and not rows:
            rows = [r for r in second.request("history")["rows"] if r["status"] == "running"]
            time.sleep(0.05)
        assert rows, "the exec'd run never showed as running"
        assert second.request("active_runs") == []          # no host: not re-attachable live
        watch = Watch()
        assert second.request("watch_run", {"run_id": rows[0]["id"]}, on_event=watch, timeout=120) == {}
        assert execd.wait(60)["code"] == 6
    finally:
        first.close()
        second.close()
    assert watch.out["stdout"] == b"".join(f"line {i}\n".encode() for i in range(20))
    assert watch.ended is not None and watch.ended["exit_code"] == 6
