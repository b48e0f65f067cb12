"""`gpuscope run` as a program ends at once once the run is recorded (cli._exit_at_once): exit
handlers run and buffered output is written as at a normal exit, the status is the command's, and
it does not cut short another non-daemon thread (a normal exit waits for those)."""

from __future__ import annotations

import subprocess
import sys

EXIT_NOW = """
import atexit, sys
from gpuscope import cli
atexit.register(lambda: print("exit handler ran", flush=True))
sys.stdout.write("buffered ")   # not flushed yet
cli._exit_at_once(7)
print("not reached")
"""

WAITS_FOR_THREAD = """
import threading, time
from gpuscope import cli
done = threading.Event()
t = threading.Thread(target=lambda: (time.sleep(0.3), done.set()))
t.start()
cli._exit_at_once(7)
print("returned", done.is_set())
t.join()
print("thread finished", done.is_set())
"""


def test_exit_at_once_runs_exit_handlers_flushes_and_keeps_the_status():
    out = subprocess.run([sys.executable, "-c", EXIT_NOW], capture_output=True, text=True, timeout=120)
    assert out.returncode == 7, out.stderr
    assert out.stdout == "buffered exit handler ran\n"


def test_exit_at_once_leaves_a_running_non_daemon_thread_alone():
    out = subprocess.run([sys.executable, "-c", WAITS_FOR_THREAD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "returned False\nthread finished True\n"


def test_the_program_exits_with_the_scripts_status_and_its_json_line(run_env, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hello')\nraise SystemExit(5)\n")
    out = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--quiet", "--json", str(script)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=run_env)
    assert out.returncode == 5, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "hello" and lines[-1].startswith("{") and '"exit_code": 5' in lines[-1]
