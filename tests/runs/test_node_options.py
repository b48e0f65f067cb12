"""The options of a node of a job across nodes: SLURM's variables, the spec's checks, the torchrun
command line, and the clock exchange between two gpuscope processes (real TCP on localhost)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from gpuscope.errors import UserError
from gpuscope.runs import clocksync
from gpuscope.runs.launcher import build_command
from gpuscope.runs.slurm import expand_nodelist, node_options
from gpuscope.spec import RunSpec
from tests import requires
from tests.runs.helpers import gpuscope, script


def test_slurm_nodelist_expansion():
    assert expand_nodelist("gpu[01-03,7],login2") == ["gpu01", "gpu02", "gpu03", "gpu7", "login2"]
    assert expand_nodelist("n[8-10]-ib") == ["n8-ib", "n9-ib", "n10-ib"]
    assert expand_nodelist("single") == ["single"]


def test_slurm_variables_fill_the_node_options():
    env = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "4", "SLURM_NODEID": "2",
           "SLURM_JOB_NODELIST": "gpu[07-10]"}
    assert node_options(env) == {"rdzv_id": "4242", "nnodes": 4, "node_rank": 2, "rdzv_endpoint": "gpu07:29500"}
    step = dict(env, SLURM_STEP_NUM_NODES="2", SLURM_STEP_NODELIST="gpu[09-10]")   # a step on 2 of the 4
    assert node_options(step)["nnodes"] == 2 and node_options(step)["rdzv_endpoint"] == "gpu09:29500"
    env.update(MASTER_ADDR="head", MASTER_PORT="1234")
    assert node_options(env)["rdzv_endpoint"] == "head:1234"
    assert node_options({"SLURM_NODEID": "1"}) == {}          # not inside a SLURM job


def test_srun_without_flags_takes_slurm_values(tmp_path, monkeypatch):
    from gpuscope.commands import run as run_cmd
    import argparse

    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_NNODES", "2")
    monkeypatch.setenv("SLURM_NODEID", "1")
    monkeypatch.setenv("SLURM_NODELIST", "a[1-2]")
    p = argparse.ArgumentParser()
    run_cmd.add_arguments(p)
    spec = run_cmd.spec_from_args(p.parse_args(["--launcher", "torchrun", "--job-dir", str(tmp_path),
                                                "--rdzv-id", "mine", "x.py"]))
    assert (spec.nnodes, spec.node_rank, spec.rdzv_endpoint, spec.rdzv_id) == (2, 1, "a1:29500", "mine")
    spec = run_cmd.spec_from_args(p.parse_args(["--launcher", "torchrun", "x.py"]))   # no --job-dir: one machine
    assert (spec.nnodes, spec.job_dir) == (1, None)


def _spec(tmp_path, **kw) -> RunSpec:
    s = tmp_path / "s.py"
    s.write_text("print(1)\n")
    return RunSpec(script=str(s), launcher="torchrun", **kw)


@pytest.mark.skipif(not requires.installed("torch"), reason="build_command checks that torch is installed")
def test_torchrun_argv_of_a_node(tmp_path):
    spec = _spec(tmp_path, nproc=4, nnodes=2, node_rank=1, rdzv_endpoint="head:29400", rdzv_id="j1",
                 rdzv_timeout_s=60, job_dir=str(tmp_path / "job")).validated()
    assert spec.job_dir == str((tmp_path / "job").resolve()) and (tmp_path / "job").is_dir()
    argv = build_command(spec, "rid", tmp_path).argv
    i = argv.index("torch.distributed.run")
    assert argv[i + 1:i + 17] == ["--nproc-per-node", "4", "--nnodes", "2", "--node-rank", "1", "--rdzv-backend",
                                  "c10d", "--rdzv-endpoint", "head:29400", "--rdzv-id", "j1", "--rdzv-conf",
                                  "join_timeout=60", spec.script]
    one = build_command(_spec(tmp_path).validated(), "rid", tmp_path).argv
    assert "--standalone" in one and "--nnodes" not in one


@pytest.mark.parametrize("kw, message", [
    (dict(nnodes=2, job_dir="J"), "--nnodes above 1 needs --rdzv-endpoint"),
    (dict(nnodes=2, node_rank=2, rdzv_endpoint="h:1", job_dir="J"), "--node-rank must be between 0 and 1"),
    (dict(nnodes=2, rdzv_endpoint="nohostport", job_dir="J"), "--rdzv-endpoint takes HOST:PORT"),
    (dict(nnodes=2, rdzv_endpoint="h:1"), "needs --job-dir DIR"),
    (dict(nnodes=2, rdzv_endpoint="h:1", job_dir="J", rdzv_id="a b"), "--rdzv-id takes letters"),
    (dict(launcher="python", nnodes=2, rdzv_endpoint="h:1", job_dir="J"), "need --launcher torchrun"),
    (dict(nnodes=0), "--nnodes must be between 1 and 4096, not 0"),
    (dict(node_rank=1), "--node-rank / --rdzv-\\* are for a job across nodes"),
    (dict(rdzv_endpoint="h:1"), "--node-rank / --rdzv-\\* are for a job across nodes"),
])
def test_bad_node_options_are_one_line_errors(tmp_path, kw, message):
    kw = dict(kw)
    if kw.get("job_dir"):
        kw["job_dir"] = str(tmp_path / kw["job_dir"])
    launcher = kw.pop("launcher", "torchrun")
    s = tmp_path / "s.py"
    s.write_text("print(1)\n")
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        RunSpec(script=str(s), launcher=launcher, **kw).validated()


def test_cli_refuses_nnodes_without_torchrun(run_env, tmp_path):
    proc = gpuscope("run", "--nnodes", "2", "--rdzv-endpoint", "h:1", "--job-dir", str(tmp_path),
                    script("helper_mod.py"), env=run_env)
    err = proc.stderr.decode().strip()
    assert proc.returncode != 0 and "need --launcher torchrun" in err and "Traceback" not in err, err


def test_clock_exchange_finds_no_offset_on_one_host():
    server = clocksync.ClockServer("127.0.0.1")
    try:
        m = clocksync.measure("127.0.0.1", server.port)
    finally:
        server.close()
    assert m.rounds == clocksync.ROUNDS and m.error is None
    assert 0 < m.residual_ns < 50_000_000
    assert abs(m.offset_ns) <= m.residual_ns + 1_000_000, m     # same clock: zero within the round trip


def test_clock_exchange_recovers_an_injected_offset(tmp_path):
    """Another process whose clock readings are 3 s behind measures against this one's server, found
    through the published file (its host name, or the fallback host)."""
    server = clocksync.ClockServer()
    path = tmp_path / "clock-j.json"
    server.publish(path, "no-such-host.invalid")
    code = ("import json, sys; from pathlib import Path; from gpuscope.runs import clocksync; "
            "m = clocksync.measure_published(Path(sys.argv[1]), '127.0.0.1', 30); print(json.dumps(m.to_dict()))")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=60,
                             env={**__import__("os").environ, clocksync.SHIFT_ENV: "-3000000000"})
    finally:
        server.close()
    assert out.returncode == 0, out.stderr.decode()
    m = json.loads(out.stdout)
    assert m["error"] is None and m["reference"] == f"127.0.0.1:{server.port}", m
    assert abs(m["offset_ns"] + 3_000_000_000) <= m["residual_ns"] + 1_000_000, m


def test_no_server_is_a_measure_with_an_error(tmp_path):
    stop = threading.Event()
    path = tmp_path / "clock-j.json"
    path.write_text(json.dumps({"host": "127.0.0.1", "port": 1, "pid": 1}))    # a stale file: nobody listens
    m = clocksync.measure_published(path, None, wait_s=1.0, stop=stop)
    assert m.offset_ns == 0 and m.residual_ns is None and "127.0.0.1:1" in m.error


def test_a_server_that_is_not_gpuscope_gives_no_offset(tmp_path):
    """A stale clock file can name a port some other program now listens on: its answer is refused."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(4)
                conn.sendall(b"HTTP/1.1 400 Bad\r\n")

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    path = tmp_path / "clock-j.json"
    path.write_text(json.dumps({"host": "127.0.0.1", "port": srv.getsockname()[1], "pid": 1}))
    m = clocksync.measure_published(path, None, wait_s=1.0)
    srv.close()
    assert m.offset_ns == 0 and m.residual_ns is None and "not a gpuscope clock server" in m.error, m


def test_reference_waits_for_the_end_exchanges():
    """Node 0 serves until every node that measured at its start has measured at its end."""
    server = clocksync.ClockServer("127.0.0.1")
    try:
        assert server.wait_for_ends(0.1)                    # nobody came: nothing to wait for
        start = clocksync.measure("127.0.0.1", server.port)
        assert not server.wait_for_ends(0.3)                # a node measured at start, not yet at its end
        end = clocksync.measure("127.0.0.1", server.port, end=True)
        assert server.wait_for_ends(5)
    finally:
        server.close()
    assert start.mono_ns < end.mono_ns and abs(end.offset_ns - start.offset_ns) <= start.residual_ns + end.residual_ns + 1_000_000
