"""With the real run engine: a process that escaped a finished `gpuscope run` (double fork +
setsid) is listed as a run leftover and cleaned up."""

from __future__ import annotations

import json
import re

import pytest

from tests.cleanup.conftest import HELPERS
from tests.cleanup.util import PY, cli_json, state_of, wait_for


@pytest.mark.timeout(120)
def test_escaped_process_of_a_finished_run(reaper, run_env):
    res = reaper("call", argv=[PY, "-m", "gpuscope", "run", "--json", str(HELPERS / "escaping_script.py")],
                 env=run_env)
    assert res["rc"] == 0, res["stderr"][-2000:]
    sleeper = int(re.search(r"sleeper (\d+)", res["stdout"]).group(1))
    run_id = json.loads(res["stdout"].strip().splitlines()[-1])["run_id"]
    assert state_of(sleeper) == "S"

    rc, listing = cli_json(run_env, "--idle-window", "0")
    s = next((x for x in listing["suspects"] if x["key"] == f"pid:{sleeper}"), None)
    assert s is not None, [x["key"] for x in listing["suspects"]]
    assert s["reasons"][0]["code"] == "run-leftover" and s["evidence"]["run_id"] == run_id
    assert f"gpuscope run {run_id} ended" in s["reasons"][0]["text"]

    rc, done = cli_json(run_env, "--kill", str(sleeper), "--yes")
    assert rc == 0 and done["results"][0]["final_state"] == "gone", done
    assert wait_for(lambda: state_of(sleeper) is None)
