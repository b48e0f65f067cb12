"""A gloo DDP program that ends without a barrier (destroy_process_group(), then the model is freed
as main() returns) exits under ``--torch-profile`` as it does without it: no hang at teardown.

While a profiler records, gloo works keep Python objects, and a worker dropping one needs the GIL
that the main thread holds while it joins the workers (docs/TORCH-PROFILER.md "Recording"). The
script holds the GIL as long as it can (``--hold-gil``), which makes the hang likely on each run
without gpuscope's settling of the workers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests import requires
from tests.torchprof.conftest import SCRIPTS

RUNS = 4
TIMEOUT_S = 150   # a run takes 10-30 s on a loaded 2-core machine; a hung one never ends


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    requires.torch()
    env = dict(os.environ)
    env["GPUSCOPE_HOME"] = str(tmp_path_factory.mktemp("gshome"))
    env.pop("PYTHONPATH", None)
    return env


def _children(pid: int) -> list[int]:
    """``pid``'s descendants (ranks start their own sessions: a process group kill misses them)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
            parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _run_once(env: dict[str, str]) -> tuple[int | None, str, str]:
    """One ``gpuscope run --torch-profile`` of the script: (exit status or None when it hung, out, err)."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "run", "-q", "--launcher", "torchrun",
                             "--nproc", "2", "--torch-profile", str(SCRIPTS / "ddp_exit.py"), "3",
                             "--hold-gil"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    tree: list[int] = []
    watching = threading.Event()

    def watch() -> None:
        while not watching.wait(2):
            tree[:] = sorted(set(tree) | set(_children(proc.pid)))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        for pid in [*_children(proc.pid), *tree, proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        out, err = proc.communicate()
        return None, out, err
    finally:
        watching.set()
        watcher.join()


@pytest.mark.torch
def test_no_hang_when_the_model_is_freed_after_destroy_process_group(env):
    started = time.monotonic()
    for k in range(RUNS):
        code, out, err = _run_once(env)
        assert code is not None, f"run {k + 1} hung at exit ({time.monotonic() - started:.0f} s in); " \
                                 f"stderr: {err[-2000:]}"
        assert code == 0, err[-3000:]
        assert sorted(re.findall(r"rank \d(?= loss [0-9.]+)", out)) == ["rank 0", "rank 1"], (out, err[-2000:])


def test_settling_returns_at_once_without_gloo_threads():
    from gpuscope.inject import torchprof

    assert torchprof._gloo_workers() == {}
    assert torchprof.settle_gloo_workers() is True
