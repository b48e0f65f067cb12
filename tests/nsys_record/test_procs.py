"""nsys process helpers that need no nsys: agent command lines, reused pids, zombies."""

from __future__ import annotations

import os
import subprocess
import sys

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
