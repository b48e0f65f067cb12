"""The hook's shared-memory watch (inject/shmwatch.py) under the real run engine: it records
creations and unlinks of segments and named semaphores (``D`` lines) and changes nothing the
program sees: the same output, the same exceptions, the same traceback files."""

from __future__ import annotations

import json
import subprocess

import pytest

from gpuscope.trace.events import read_run_events
from tests.cleanup.util import PY

SCRIPT = r'''
import gc, multiprocessing, sys, traceback
from multiprocessing import shared_memory
a = shared_memory.SharedMemory(create=True, size=10)
try:
    shared_memory.SharedMemory(name=a.name, create=True, size=10)
except FileExistsError as e:
    print("raised", type(e).__name__, [f.name for f in traceback.extract_tb(e.__traceback__)])
b = shared_memory.SharedMemory(name=a.name)          # attach: no creation
b.close()
a.close()
a.unlink()
c = shared_memory.SharedMemory(None, True, 12)       # created with positional arguments
c.close()
c.unlink()
print("names", shared_memory.SharedMemory.__init__.__name__, shared_memory.SharedMemory.unlink.__name__)
spawn_lock = multiprocessing.get_context("spawn").Lock()
fork_lock = multiprocessing.get_context("fork").Lock()   # unlinked at once: no name to leak
print("sem", spawn_lock._semlock.name is not None, fork_lock._semlock.name is None)
del spawn_lock
gc.collect()
print("done", a.name.startswith("psm_"))
'''


def _plain(tmp_path) -> str:
    return subprocess.run([PY, str(tmp_path / "s.py")], capture_output=True, text=True, timeout=60,
                          check=True).stdout


@pytest.mark.timeout(120)
def test_the_watch_records_and_changes_nothing(reaper, run_env, tmp_path):
    (tmp_path / "s.py").write_text(SCRIPT)
    res = reaper("call", argv=[PY, "-m", "gpuscope", "run", "--json", str(tmp_path / "s.py")], env=run_env)
    assert res["rc"] == 0, res["stderr"][-2000:]
    lines = res["stdout"].strip().splitlines()
    result = json.loads(lines[-1])
    assert "\n".join(lines[:-1]) + "\n" == _plain(tmp_path)      # the program's own output, unchanged
    shm = [info for pe in read_run_events(result["run_dir"]) for _, info in pe.shm]
    segs = [(i["op"], i["kind"]) for i in shm if i["kind"] == "shm"]
    assert segs == [("create", "shm"), ("unlink", "shm")] * 2, shm   # the failed create and the attach: none
    created = [i for i in shm if i["op"] == "create" and i["kind"] == "shm"]
    assert created[0]["size"] == 10 and created[0]["where"].endswith("s.py:4") and created[0]["name"].startswith("psm_")
    assert created[1]["size"] == 12 and created[1]["where"].endswith("s.py:13")
    sems = [(i["op"], i["name"].startswith("sem.mp-")) for i in shm if i["kind"] == "sem"]
    assert sems == [("create", True), ("unlink", True)], shm     # the spawn Lock, made and cleaned up
