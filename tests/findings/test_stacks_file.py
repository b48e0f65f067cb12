"""One file per process for its stacks: faulthandler's dumps and the names of its threads, written
by the injected hook of a real interpreter and read back by ``gpuscope stacks``' reader."""

from __future__ import annotations

import os
import subprocess
import sys

from gpuscope import rundir
from gpuscope.findings.stacks import dump_processes, thread_names

WAITER = """\
import sys, threading, time
stop = threading.Event()
def waits_in_thread():
    stop.wait(60)
threading.Thread(target=waits_in_thread, name="loader-1", daemon=True).start()
def waits_in_main():
    print("ready", flush=True)
    sys.stdin.readline()
waits_in_main()
"""


def _injected_env(run_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}
    env.update(PYTHONPATH=rundir.boot_dir(), GPUSCOPE_RUN_DIR=run_dir, GPUSCOPE_RUN_ID="test",
               GPUSCOPE_SCRIPT="/nonexistent/script.py", GPUSCOPE_START_METHOD="default")
    return env


def test_a_process_dumps_its_named_threads_into_its_one_stacks_file(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WAITER], env=_injected_env(str(tmp_path)), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == "ready\n", proc.stderr.read()
        stacks = tmp_path / "stacks"
        assert os.listdir(stacks) == [f"{proc.pid}.dump"]             # no second file per process
        names = thread_names(stacks / f"{proc.pid}.dump")
        assert sorted(names.values()) == ["MainThread", "loader-1"]
        got = dump_processes(tmp_path, {proc.pid: "main"}, timeout_s=20)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert [p.source for p in got] == ["faulthandler"], got
    by_name = {t.name: [f.function for f in t.frames] for t in got[0].threads}
    assert "waits_in_main" in by_name["MainThread"] and "waits_in_thread" in by_name["loader-1"], by_name
    assert not (tmp_path / "inject-errors.log").exists()
