"""Stale Nsight Systems agents, with real nsys: an agent is listed only once the `nsys profile`
that owns its session is gone, and terminating it works."""

from __future__ import annotations

import glob
import os
import signal

import psutil
import pytest

from gpuscope.cleanup import Policy, Scanner, perform
from gpuscope.cleanup import model as m
from gpuscope.paths import cache_dir
from tests.cleanup.util import state_of, wait_for

NSYS_REL = "usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys"


def _installs() -> dict[str, str]:
    found = {}
    for path in sorted(glob.glob(str(cache_dir() / "nsys" / "*" / NSYS_REL))):
        found[path.split(os.sep + "nsys" + os.sep)[1].split(os.sep)[0]] = path
    return found


INSTALLS = _installs()


def _agent_of(front: int) -> int | None:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "--start-agent" in cmd and any(a.endswith(f"-{front}") for a in cmd):
            return p.pid
    return None


@pytest.mark.nsys
@pytest.mark.timeout(90)
@pytest.mark.parametrize("version", sorted(INSTALLS) or ["none"])
def test_agent_of_a_killed_nsys_profile_is_stale(reaper, tmp_path, version):
    if version not in INSTALLS:
        pytest.skip("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
    argv = [INSTALLS[version], "profile", "--trace=nvtx", "--sample=none", "-o",
            str(tmp_path / "r"), "-f", "true", "sleep", "60"]
    front = reaper("spawn", argv=argv, setsid=True)["pid"]
    agent = wait_for(lambda: _agent_of(front), timeout=40, step=0.2)
    assert agent, f"nsys {version} started no agent"
    live = Scanner(use_gpu=False, shm_min_age_s=1e9).scan().by_pid(agent)
    assert live is None or m.STALE_NSYS_AGENT not in live.codes   # its session is alive

    os.kill(front, signal.SIGKILL)          # our own nsys profile, as a timeout would
    assert wait_for(lambda: state_of(front) is None)
    scanner = Scanner(use_gpu=False, shm_min_age_s=1e9)
    scanner.sample(0.5, interval=0.25)
    s = scanner.scan().by_pid(agent)
    assert s is not None and m.STALE_NSYS_AGENT in s.codes
    text = s.reasons[s.codes.index(m.STALE_NSYS_AGENT)].text
    assert f"whose `nsys profile` (pid {front}) is gone" in text and "% of a core" in text
    res = perform(s, policy=Policy(grace_s=2))
    assert res.ok and res.final_state == "gone", res
