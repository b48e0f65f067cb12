"""The agent over a local pipe (``connect_local``): hello, errors, exec, cancel, many requests."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from gpuscope.errors import UserError
from gpuscope.remote import protocol
from gpuscope.remote.connection import Connection, connect_local
from gpuscope.remote.protocol import ConnectionLostError, ProtocolError, RemoteError

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def conn():
    c = connect_local()
    yield c
    c.close()
    assert c.proc is not None and c.proc.poll() is not None


def collect(out: dict[str, bytes]):
    def on_event(kind: str, data: dict) -> None:
        out[kind] = out.get(kind, b"") + base64.b64decode(data["b64"])
    return on_event


def test_hello_names_the_agent(conn):
    hello = conn.hello
    assert hello["hello"] == "gpuscope-agent" and hello["protocol"] == protocol.PROTOCOL
    assert hello["uid"] == os.getuid() and hello["data_dir"] == os.environ["GPUSCOPE_HOME"]
    assert conn.request("hello")["pid"] == conn.proc.pid


def test_another_protocol_version_is_one_clear_error():
    script = ("import json,sys; print(json.dumps({'hello': 'gpuscope-agent', 'protocol': 99, "
              "'version': '9.9'}), flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    with pytest.raises(ProtocolError, match="protocol 99.*speaks 1") as err:
        Connection(proc, host="oldbox")
    assert isinstance(err.value, UserError) and "\n" not in str(err.value)
    assert proc.poll() is not None


def test_a_program_that_is_not_an_agent_is_refused():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('Traceback: no module', file=sys.stderr)"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with pytest.raises(ProtocolError, match="ended before its hello.*Traceback: no module"):
        Connection(proc, host="box")


def test_unknown_op_is_an_error_reply_and_the_agent_lives_on(conn):
    with pytest.raises(RemoteError, match="unknown op 'frobnicate'"):
        conn.request("frobnicate", {"x": 1})
    with pytest.raises(RemoteError, match="missing argument 'path'"):
        conn.request("read_file", {})
    assert conn.request("hello")["protocol"] == 1


def test_a_broken_line_is_answered_and_the_agent_lives_on(conn):
    replies: list[dict] = []
    done = threading.Event()
    real = conn._dispatch

    def spy(message):
        if message.get("id") == -1:
            replies.append(message)
            done.set()
        real(message)
    conn._dispatch = spy
    with conn._write_lock:
        conn._writer.write(b"this is not json\n")
        conn._writer.flush()
    assert done.wait(10)
    assert replies[0]["ok"] is False and "not a protocol line" in replies[0]["error"]
    assert conn.request("hello")["protocol"] == 1


def test_exec_history_json_streams_stdout(conn):
    out: dict[str, bytes] = {}
    result = conn.request("exec", {"argv": ["history", "--json"]}, on_event=collect(out), timeout=60)
    assert result == {"code": 0}
    assert json.loads(out["stdout"]) == []


def test_exec_bad_command_line_gives_its_exit_code_and_stderr(conn):
    out: dict[str, bytes] = {}
    result = conn.request("exec", {"argv": ["history", "--no-such-flag"]}, on_event=collect(out), timeout=60)
    assert result["code"] == 2 and b"--no-such-flag" in out["stderr"]
    with pytest.raises(RemoteError, match="argv is a non-empty list"):
        conn.request("exec", {"argv": "history"})


def test_read_file_by_offset_and_list_dir(conn, tmp_path):
    blob = os.urandom(300_000)
    (tmp_path / "f.bin").write_bytes(blob)
    (tmp_path / "sub").mkdir()
    got = b""
    while len(got) < len(blob):
        r = conn.request("read_file", {"path": str(tmp_path / "f.bin"), "offset": len(got), "length": 100_000})
        assert r["size"] == len(blob)
        got += base64.b64decode(r["b64"])
    assert got == blob
    listing = conn.request("list_dir", {"path": str(tmp_path)})
    assert listing["entries"] == [{"name": "f.bin", "dir": False, "size": len(blob)},
                                  {"name": "sub", "dir": True, "size": 0}]
    with pytest.raises(RemoteError, match="no such file"):
        conn.request("read_file", {"path": str(tmp_path / "nope")})


def test_cancel_ends_a_streaming_exec(conn):
    lines: list[bytes] = []
    started = threading.Event()

    def on_event(kind, data):
        lines.append(base64.b64decode(data["b64"]))
        started.set()
    pending = conn.start("exec", {"argv": ["monitor", "--interval", "0.2"]}, on_event=on_event)
    assert started.wait(60), "monitor printed nothing"
    t0 = time.monotonic()
    pending.cancel()
    result = pending.wait(30)
    assert result["code"] is not None and time.monotonic() - t0 < 10


def test_many_concurrent_requests_are_multiplexed(conn, tmp_path):
    for i in range(20):
        (tmp_path / f"{i}.txt").write_text(str(i) * (i + 1))
    results: dict[int, bytes] = {}
    pendings = [(i, conn.start("read_file", {"path": str(tmp_path / f"{i}.txt")})) for i in range(20)]
    execs = [conn.start("exec", {"argv": ["history", "--json"]}) for _ in range(3)]
    for i, p in pendings:
        results[i] = base64.b64decode(p.wait(60)["b64"])
    assert results == {i: (str(i) * (i + 1)).encode() for i in range(20)}
    assert all(p.wait(60) == {"code": 0} for p in execs)


def test_a_lost_connection_fails_pending_requests_with_one_line():
    conn = connect_local(host="box7")
    closed: list[str] = []
    conn.on_closed(closed.append)
    pending = conn.start("exec", {"argv": ["monitor", "--interval", "0.5"]})
    time.sleep(0.5)
    conn.proc.kill()
    with pytest.raises(ConnectionLostError, match="^the connection to box7 was lost$"):
        pending.wait(30)
    assert closed == ["the connection to box7 was lost"]
    with pytest.raises(ConnectionLostError):
        conn.request("hello")
    conn.close()


def test_an_unexpected_failure_is_one_line_naming_the_log(conn):
    with pytest.raises(protocol.RemoteInternalError, match="internal error in list_dir: ValueError") as err:
        conn.request("list_dir", {"path": "bad\x00path"})
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text
    log = os.path.join(os.environ["GPUSCOPE_HOME"], "gpuscope-errors.log")
    assert log in text and "Traceback" in open(log).read()
    assert conn.request("hello")["protocol"] == 1


def test_a_request_past_its_timeout_is_cancelled(conn):
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="exec did not answer within 1 s"):
        conn.request("exec", {"argv": ["monitor", "--interval", "0.5"]}, timeout=1)
    assert time.monotonic() - t0 < 5
    assert conn.request("hello")["protocol"] == 1


def test_close_fails_pending_requests_and_ends_the_agent():
    conn = connect_local(host="box8")
    pending = conn.start("exec", {"argv": ["monitor", "--interval", "0.5"]})
    conn.close()
    with pytest.raises(ConnectionLostError, match="box8 was closed"):
        pending.wait(10)
    assert conn.proc.poll() is not None


def test_lines_before_the_hello_go_to_on_preamble():
    script = ("import os, sys; print('installing gpuscope 0.1.0', flush=True); "
              "os.execv(sys.executable, [sys.executable, '-m', 'gpuscope.remote.agent'])")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    seen: list[str] = []
    conn = Connection(proc, host="fresh", on_preamble=seen.append)
    try:
        assert seen == ["installing gpuscope 0.1.0"]
        assert conn.request("hello")["pid"] == proc.pid
    finally:
        conn.close()


def test_a_full_disk_is_one_user_line_over_any_pipes():
    """An Agent in this process over two os.pipe pairs; its op writes to /dev/full (a real ENOSPC)."""
    from gpuscope.remote.agent import Agent

    def fill(call):
        with open("/dev/full", "wb", buffering=0) as fh:
            fh.write(b"x" * 4096)

    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    agent = Agent(os.fdopen(to_agent_r, "rb"), os.fdopen(from_agent_w, "wb"), ops={"fill": fill})
    served = threading.Thread(target=agent.serve, daemon=True)
    served.start()
    conn = Connection(reader=os.fdopen(from_agent_r, "rb"), writer=os.fdopen(to_agent_w, "wb"), host="pipes")
    try:
        with pytest.raises(RemoteError, match=r"^fill: no space left on the remote's disk") as err:
            conn.request("fill")
        assert type(err.value) is RemoteError
    finally:
        conn.close()
    served.join(10)
    assert not served.is_alive()
    agent.writer.close()          # the connection's reader sees its end, then every pipe is closed
    conn._thread.join(10)
    for pipe in (agent.reader, conn._reader):
        pipe.close()
