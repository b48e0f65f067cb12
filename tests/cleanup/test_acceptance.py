"""The issue's acceptance: a setsid orphan sleeper, a zombie child and a leaked shared memory
segment — all real — are listed by ``gpuscope cleanup --json`` with the right reasons, and
``gpuscope cleanup --kill … --unlink … --yes`` removes them; every action is logged."""

from __future__ import annotations

import os
import pwd

import pytest

from tests.cleanup.util import cli, cli_json, make_finished_run, state_of, wait_for

ME = pwd.getpwuid(os.geteuid()).pw_name   # who runs the suite (not always root)


def _suspect(listing: dict, key: str) -> dict:
    found = [s for s in listing["suspects"] if s["key"] == key]
    assert found, f"{key} not listed; keys: {[s['key'] for s in listing['suspects']]}"
    return found[0]


@pytest.mark.timeout(300)   # a whole CLI round trip; slow on a saturated machine
def test_list_then_clean_sleeper_zombie_and_segment(reaper, store, run_env, leaked_shm):
    run_id = make_finished_run(store)
    sleeper = reaper("sleeper", env={"GPUSCOPE_RUN_ID": run_id})["pid"]
    z = reaper("zombie", reap=True)
    assert state_of(z["zombie"]) == "Z"

    rc, listing = cli_json(run_env, "--shm-min-age", "0", "--idle-window", "0")
    assert rc == 0
    s = _suspect(listing, f"pid:{sleeper}")
    assert s["kind"] == "process" and s["evidence"]["run_id"] == run_id
    assert [r["code"] for r in s["reasons"]] == ["run-leftover"]
    assert f"gpuscope run {run_id} ended" in s["reasons"][0]["text"]
    assert "GPUSCOPE_RUN_ID" in s["reasons"][0]["text"]
    assert s["actions"] == ["terminate", "kill"] and s["blocked"] is None
    ev = s["evidence"]
    for field in ("pid", "user", "cmdline", "age_s", "state", "cpu_percent", "rss_bytes",
                  "gpu_memory_bytes", "last_activity", "create_time"):
        assert field in ev
    assert ev["user"] == ME and "time.sleep(600)" in ev["cmdline"] and ev["state"] == "sleeping"

    zs = _suspect(listing, f"pid:{z['zombie']}")
    assert zs["kind"] == "zombie" and [r["code"] for r in zs["reasons"]] == ["zombie"]
    assert f"(pid {z['parent']}) to reap it" in zs["reasons"][0]["text"]
    assert zs["actions"] == ["signal-parent"] and zs["evidence"]["ppid"] == z["parent"]

    shm = _suspect(listing, f"shm:{leaked_shm}")
    assert shm["kind"] == "shm" and [r["code"] for r in shm["reasons"]] == ["leaked-shm"]
    assert shm["evidence"]["allocated_bytes"] >= 1 << 20
    assert shm["evidence"]["creator"] == "Python multiprocessing.shared_memory"
    assert "not mapped or open by any process" in shm["reasons"][0]["text"]
    assert listing["gpu_checked"] is False and any(n.startswith("GPU checks skipped")
                                                   for n in listing["notes"])

    rc, done = cli_json(run_env, "--kill", str(sleeper), str(z["zombie"]),
                        "--unlink", leaked_shm, "--yes", "--grace", "2")
    assert rc == 0, done
    by_target = {r["target"]: r for r in done["results"]}
    assert by_target[f"pid {sleeper}"]["action"] == "terminate"
    assert by_target[f"pid {sleeper}"]["final_state"] == "gone"
    assert "with SIGTERM" in by_target[f"pid {sleeper}"]["message"]
    assert by_target[f"pid {z['zombie']}"]["action"] == "signal-parent"
    assert "reaped zombie" in by_target[f"pid {z['zombie']}"]["message"]
    assert by_target[f"/dev/shm/{leaked_shm}"]["result"] == "done"
    assert wait_for(lambda: state_of(sleeper) is None)
    # the parent lives on: it may still be running its SIGCHLD handler at the first look
    assert state_of(z["zombie"]) is None and wait_for(lambda: state_of(z["parent"]) == "S")
    assert not os.path.exists(f"/dev/shm/{leaked_shm}")

    rc, listing = cli_json(run_env, "--shm-min-age", "0", "--idle-window", "0")
    keys = {s["key"] for s in listing["suspects"]}
    assert not keys & {f"pid:{sleeper}", f"pid:{z['zombie']}", f"shm:{leaked_shm}"}

    rc, hist = cli_json(run_env, "--history", "10")
    logged = {(a["action"], a["target"], a["result"]) for a in hist["actions"]}
    assert ("terminate", f"pid {sleeper}", "done") in logged
    assert ("signal-parent", f"pid {z['zombie']}", "done") in logged
    assert ("unlink", f"/dev/shm/{leaked_shm}", "done") in logged
    row = next(a for a in hist["actions"] if a["action"] == "terminate")
    assert row["user"].split(" (sudo from ")[0] == ME and row["run_id"] == run_id
    assert row["identity"]["pid"] == sleeper and row["identity"]["create_time"] > 0


def test_text_listing_names_the_reason_and_the_command_to_run(reaper, store, run_env):
    run_id = make_finished_run(store)
    sleeper = reaper("sleeper", env={"GPUSCOPE_RUN_ID": run_id})["pid"]
    res = cli(run_env, "--idle-window", "0")
    assert res.returncode == 0, res.stderr
    assert f"pid {sleeper}" in res.stdout and "[run-leftover]" in res.stdout
    assert "note: GPU checks skipped:" in res.stdout
    assert res.stdout.count("GPU checks skipped") == 1
    assert "To clean up: gpuscope cleanup --kill" in res.stdout and str(sleeper) in res.stdout


def test_kill_without_yes_is_a_dry_run(reaper, store, run_env):
    run_id = make_finished_run(store)
    sleeper = reaper("sleeper", env={"GPUSCOPE_RUN_ID": run_id})["pid"]
    res = cli(run_env, "--kill", str(sleeper))
    assert res.returncode == 1
    assert f"would terminate pid {sleeper}" in res.stdout and "add --yes" in res.stdout
    assert state_of(sleeper) == "S"
