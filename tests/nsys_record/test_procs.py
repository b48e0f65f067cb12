"""nsys process helpers that need no nsys: agent command lines, reused pids, zombies."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from gpuscope.nsys import agents as procs

NSYS = "/x/target-linux-x64/nsys"


def test_agent_command_lines_of_each_version():
    assert procs.agent_of([NSYS, "--start-agent", "--session-name=profile-python-8421", "--shm-name=q"]) == \
        ("profile-python-8421", 8421)                                              # 2022.4
    assert procs.agent_of([NSYS, "--start-agent", "--session-name=profile-12898"]) == ("profile-12898", 12898)
    assert procs.agent_of([NSYS, "--start-agent", "--session-name", "profile-12969", "--shm-name", "N"]) == \
        ("profile-12969", 12969)                                                   # 2024.2
    assert procs.agent_of([NSYS, "--start-agent", "--session-name=custom"]) == ("custom", None)
    assert procs.agent_of([NSYS, "profile", "-o", "x"]) is None
    assert procs.agent_of(["/bin/sleep", "--start-agent"]) is None


def test_zombies_are_not_alive_and_reused_pids_are_not_nsys():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while procs.alive(child.pid):       # exits, stays a zombie until we reap it
        os.sched_yield()
    assert not procs.alive(child.pid) and procs.still_nsys(child.pid)
    child.wait()
    assert not procs.still_nsys(os.getpid())          # a live program that is not nsys


def test_tree_never_includes_the_caller():
    assert os.getpid() not in procs.tree({os.getpid(), os.getppid()})


FAKE_AGENT = """
import os, sys
os.execv("/bin/sh", [sys.argv[1], "-c", "sleep 600; :", "--start-agent", "--session-name=" + sys.argv[2]])
"""


def test_stale_agents_are_found_by_nsys_and_by_cleanup(tmp_path):
    """Agents are real processes whose command line is an nsys agent's (no nsys needed): one
    whose `nsys profile` pid is gone is stale for nsys.agents and listed by cleanup's scan; one
    whose profile process is alive (an `nsys`-named process started before it) is not; nor is a
    session of another kind."""
    from gpuscope.cleanup import Scanner
    from gpuscope.cleanup import model as m

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()                                              # its pid names no process now
    front = subprocess.Popen([sys.executable, "-c", FAKE_AGENT, f"{tmp_path}/nsys", "launch-session"])
    started = []
    try:
        for session in (f"profile-python-{gone.pid}", f"profile-{front.pid}", "custom-session"):
            started.append(subprocess.Popen([sys.executable, "-c", FAKE_AGENT, NSYS, session]))
        stale, alive_front, custom = (p.pid for p in started)
        for pid in (front.pid, stale, alive_front, custom):   # exec'd sh, and its sleep started
            while b"--start-agent" not in open(f"/proc/{pid}/cmdline", "rb").read() \
                    or not open(f"/proc/{pid}/task/{pid}/children").read().strip():
                time.sleep(0.01)
        assert [a.profile_pid for a in procs.agents() if a.pid == stale] == [gone.pid]
        found = procs.find_stale_agents()
        assert stale in found and alive_front not in found and custom not in found
        result = Scanner(use_gpu=False, shm_min_age_s=1e9).scan()
        s = result.by_pid(stale)
        assert s is not None and s.codes == [m.STALE_NSYS_AGENT], result.suspects
        assert f"whose `nsys profile` (pid {gone.pid}) is gone" in s.reasons[0].text
        assert result.by_pid(alive_front) is None and result.by_pid(custom) is None
    finally:
        for p in [front, *started]:
            _kill_tree(p)


def _kill_tree(p: subprocess.Popen) -> None:
    """The sh and its sleep: kill the sleep first (sh reaps it), then the sh."""
    for child in (int(c) for c in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()):
        os.kill(child, 9)
    p.kill()
    p.wait()
