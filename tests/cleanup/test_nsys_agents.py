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
from gpuscope.nsys.lock import NsysLock
from gpuscope.paths import cache_dir
from tests.cleanup.util import state_of, wait_for
from tests.nsys_versions import VERSIONS

NSYS_REL = "usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys"


def _installs() -> dict[str, str]:
    found = {}
    for path in sorted(glob.glob(str(cache_dir() / "nsys" / "*" / NSYS_REL))):
        found[path.split(os.sep + "nsys" + os.sep)[1].split(os.sep)[0]] = path
    return found


INSTALLS = {k: v for k, v in _installs().items() if k in VERSIONS}   # tests/nsys_versions.py


def _agent_of(front: int, reaper: int) -> int | None:
    """The daemonised agent of ``front``'s session: re-parented to the subreaper. `nsys
    --start-agent` first runs as a short-lived child that forks the daemon and exits."""
    for p in psutil.process_iter(["cmdline", "ppid"]):
        cmd = p.info["cmdline"] or []
        if "--start-agent" in cmd and any(a.endswith(f"-{front}") for a in cmd) and p.info["ppid"] == reaper:
            return p.pid
    return None


def _agents_now() -> list[tuple[int, int, list[str]]]:
    return [(p.pid, p.info["ppid"], p.info["cmdline"]) for p in psutil.process_iter(["cmdline", "ppid"])
            if "--start-agent" in (p.info["cmdline"] or [])]


NSYS_SHM = ("sem.nsys_sem_", "sem.NSys-process_waiter-", "quadd-agent-instance-")


def _shm_used_by(pids: set[int]) -> set[str]:
    """/dev/shm names our nsys processes map or hold open (read while they are alive)."""
    names = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as fh:
                names |= {line.split()[-1] for line in fh if " /dev/shm/" in line}
            for fd in os.listdir(f"/proc/{pid}/fd"):
                names.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return {n[len("/dev/shm/"):] for n in names if n.startswith("/dev/shm/")}


def _remove_our_nsys_leftovers(names: set[str]) -> None:
    """A killed `nsys profile` leaves per-process semaphores and segments behind: remove the
    ones our processes used, once no live process uses them (checked with gpuscope's own scan)."""
    from gpuscope.cleanup.shm import leaked_segments

    ours = {n for n in names if n.startswith(NSYS_SHM)}
    leaked = {seg.name for seg in leaked_segments(min_age_s=0)[0]}    # semaphores (sem.*) too
    for name in ours & leaked:
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except FileNotFoundError:
            pass


@pytest.mark.nsys
@pytest.mark.timeout(400)   # the machine-wide nsys lock may wait for other suites' recordings
@pytest.mark.parametrize("version", sorted(INSTALLS) or ["none"])
def test_agent_of_a_killed_nsys_profile_is_stale(reaper, tmp_path, version):
    if version not in INSTALLS:
        if os.environ.get("CI") == "true":   # CI provisions nsys: its absence is a failure there
            pytest.fail("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
        pytest.skip("Nsight Systems is not provisioned (scripts/provision_nsys.py)")
    argv = [INSTALLS[version], "profile", "--trace=nvtx", "--sample=none", "-o",
            str(tmp_path / "r"), "-f", "true", "sleep", "60"]
    # One nsys profile at a time on this machine, as gpuscope's own recordings: killing this one
    # and removing its leftovers while another test's recording ran made that one's nsys fail
    # (`sem_open`: No such file or directory; seen once in CI).
    lock = NsysLock()
    assert lock.acquire(timeout_s=300), "another nsys recording held the machine-wide lock for 300 s"
    try:
        front = reaper("spawn", argv=argv, setsid=True)["pid"]
        used: set[str] = set()
        try:
            _stale_agent_case(reaper, front, version, used)
        finally:
            used |= _shm_used_by({p.pid for p in psutil.Process(reaper.pid).children(recursive=True)})
            reaper.close()
            _remove_our_nsys_leftovers(used)
    finally:
        lock.release()


def _stale_agent_case(reaper, front: int, version: str, used: set[str]) -> None:
    agent = wait_for(lambda: _agent_of(front, reaper.pid), timeout=40, step=0.2)
    assert agent, f"nsys {version} started no agent"
    assert wait_for(lambda: any(p.name() == "sleep" for p in
                                psutil.Process(reaper.pid).children(recursive=True)), timeout=20)
    used |= _shm_used_by({p.pid for p in psutil.Process(reaper.pid).children(recursive=True)})
    live = Scanner(use_gpu=False, shm_min_age_s=1e9).scan().by_pid(agent)
    assert live is None or m.STALE_NSYS_AGENT not in live.codes   # its session is alive

    os.kill(front, signal.SIGKILL)          # our own nsys profile, as a timeout would
    assert wait_for(lambda: state_of(front) is None)
    scanner = Scanner(use_gpu=False, shm_min_age_s=1e9)
    scanner.sample(0.5, interval=0.25)
    s = scanner.scan().by_pid(agent)
    assert s is not None and m.STALE_NSYS_AGENT in s.codes, (agent, state_of(agent), _agents_now())
    text = s.reasons[s.codes.index(m.STALE_NSYS_AGENT)].text
    assert f"whose `nsys profile` (pid {front}) is gone" in text and "% of a core" in text
    res = perform(s, policy=Policy(grace_s=2))
    assert res.ok and res.final_state == "gone", res
