"""A run that leaves a shared memory segment: its end names the segment (size, process, the line
that created it) as `leaked-shm`, and `gpuscope cleanup` shows which run made it. Real run engine,
real /dev/shm, a real `setsid` sleeper."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from tests.cleanup.conftest import HELPERS
from tests.cleanup.util import PY, cli_json, state_of, wait_for

SCRIPT = HELPERS / "leaking_shm_script.py"
LINE = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if "LEAK-LINE" in text)


@pytest.fixture
def leaking_run(reaper, run_env):
    res = reaper("call", argv=[PY, "-m", "gpuscope", "run", "--json", str(SCRIPT)], env=run_env)
    found = re.search(r"segment (\S+) sleeper (\d+)", res["stdout"])
    assert found, res["stdout"][-2000:] + res["stderr"][-2000:]
    name, sleeper = found.group(1), int(found.group(2))
    try:
        yield res, name, sleeper
    finally:
        if state_of(sleeper) not in (None, "Z"):
            os.kill(sleeper, signal.SIGKILL)
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")


@pytest.mark.timeout(120)
def test_the_runs_end_names_the_segment_and_cleanup_its_run(leaking_run, run_env):
    res, name, sleeper = leaking_run
    assert res["rc"] == 0, res["stderr"][-2000:]
    result = json.loads(res["stdout"].strip().splitlines()[-1])
    main = next(p["pid"] for p in result["processes"] if p["role"] == "main")
    leaked = [f for f in result["findings"] if f["code"] == "leaked-shm"]
    assert len(leaked) == 1, result["findings"]
    f = leaked[0]
    assert f"/dev/shm/{name} of 1048576 bytes, created by pid {main} at {SCRIPT}:{LINE}" in f["title"]
    assert f["pids"] == [main] and f["action"] == {"kind": "cleanup-shm", "names": [name]}
    assert dict(f["evidence"]["numbers"]) == {"segments": 1, "bytes": 1 << 20, "semaphores": 0}
    assert "unlink()" in f["fix"]
    assert os.path.exists(f"/dev/shm/{name}")          # the finding names it; nothing removed it

    rc, listing = cli_json(run_env, "--shm-min-age", "0", "--idle-window", "0")
    assert rc == 0, listing
    s = next((x for x in listing["suspects"] if x["key"] == f"shm:{name}"), None)
    assert s is not None, [x["key"] for x in listing["suspects"]]
    ev = s["evidence"]
    assert ev["run_id"] == result["run_id"] and ev["creator_pid"] == main
    assert ev["created_at"] == f"{SCRIPT}:{LINE}"
    assert f"made by gpuscope run {result['run_id']} (pid {main}, {SCRIPT}:{LINE})" in s["reasons"][0]["text"]
    # the sleeper that escaped the run's session is named too, as before
    p = next((x for x in listing["suspects"] if x["key"] == f"pid:{sleeper}"), None)
    assert p is not None and p["evidence"]["run_id"] == result["run_id"]

    rc, done = cli_json(run_env, "--unlink", name, "--kill", str(sleeper), "--yes")
    assert rc == 0, done
    assert not os.path.exists(f"/dev/shm/{name}") and wait_for(lambda: state_of(sleeper) is None)


@pytest.mark.timeout(120)
def test_an_unlinked_segment_is_no_finding(reaper, run_env, tmp_path):
    script = tmp_path / "tidy.py"
    script.write_text("from multiprocessing import shared_memory\n"
                      "s = shared_memory.SharedMemory(create=True, size=1 << 20)\n"
                      "s.close()\ns.unlink()\nprint('done', flush=True)\n")
    res = reaper("call", argv=[PY, "-m", "gpuscope", "run", "--json", str(script)], env=run_env)
    assert res["rc"] == 0, res["stderr"][-2000:]
    result = json.loads(res["stdout"].strip().splitlines()[-1])
    assert not [f for f in result["findings"] if f["code"] == "leaked-shm"], result["findings"]


def test_a_segment_unlinked_by_another_process_is_not_left():
    """left_by works across the run's processes (the reader's D lines, in time order)."""
    from types import SimpleNamespace

    from gpuscope.procs.shm import left_by

    creator = SimpleNamespace(pid=10, shm=[(1, {"op": "create", "kind": "shm", "name": "psm_a", "size": 8,
                                                "where": "x.py:1"}),
                                           (2, {"op": "create", "kind": "sem", "name": "sem.mp-b"})])
    other = SimpleNamespace(pid=11, shm=[(3, {"op": "unlink", "kind": "shm", "name": "psm_a"}),
                                         (4, {"op": "create", "kind": "shm", "name": "psm_c", "size": 16})])
    left = left_by([creator, other])
    assert [(m.name, m.kind, m.pid, m.size) for m in left] == [("sem.mp-b", "sem", 10, None),
                                                              ("psm_c", "shm", 11, 16)]
