"""Leaked POSIX named semaphores (/dev/shm/sem.*), judged like shared-memory segments: a real
leftover made by a process that creates a named semaphore through CPython's own
``_multiprocessing.SemLock`` (what ``multiprocessing.synchronize.Lock`` uses under spawn and
forkserver), holds it, and is SIGKILLed before anything unlinks it."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

import pytest

from gpuscope.cleanup import Policy, Scanner, perform, unlink_segment
from gpuscope.cleanup import model as m
from gpuscope.cleanup.shm import SHM_MIN_AGE_S
from tests.cleanup.util import cli, cli_json, held_semaphore, wait_for

@pytest.fixture
def semaphore_holder():
    """(name of the /dev/shm file, the live process that created and maps it)."""
    with held_semaphore() as held:
        yield held


def _killed(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def _scan(min_age: float = 0.0) -> m.ScanResult:
    return Scanner(use_gpu=False, shm_min_age_s=min_age).scan()


def test_a_semaphore_in_use_is_not_listed_and_cannot_be_unlinked(semaphore_holder):
    name, proc = semaphore_holder
    assert _scan().by_shm(name) is None                      # mapped by the live holder
    st = os.stat(f"/dev/shm/{name}")
    res = unlink_segment(m.ShmIdentity(name, st.st_dev, st.st_ino), Policy())
    assert not res.ok and res.result == "refused"
    assert res.message.startswith(f"refusing: /dev/shm/{name} is in use by pid {proc.pid} ("), res.message
    assert os.path.exists(f"/dev/shm/{name}")


def test_a_semaphore_left_by_a_killed_process_is_listed_and_removed_safely(semaphore_holder):
    name, proc = semaphore_holder
    _killed(proc)
    assert os.path.exists(f"/dev/shm/{name}")               # nothing unlinked it: a real leftover
    s = _scan().by_shm(name)
    assert s is not None and s.kind == m.KIND_SHM and s.codes == [m.LEAKED_SEM]
    assert s.evidence.semaphore is True and s.evidence.owner
    assert s.evidence.creator.startswith("Python multiprocessing")
    assert "not mapped or open by any process" in s.reasons[0].text
    assert s.actions == [m.UNLINK] and s.blocked is None
    res = perform(s, policy=Policy())
    assert res.ok and res.result == "done", res
    assert not os.path.exists(f"/dev/shm/{name}")


def test_a_young_semaphore_is_held_back_with_a_note(semaphore_holder, tmp_path):
    name, proc = semaphore_holder
    _killed(proc)
    # a folder on /dev/shm's file system that holds only a second name (a hard link) of the leftover
    folder = f"/dev/shm/gpuscopetest-{uuid.uuid4().hex[:8]}"
    os.mkdir(folder)
    try:
        os.link(f"/dev/shm/{name}", f"{folder}/{name}")
        young = Scanner(use_gpu=False, shm_dir=folder, shm_min_age_s=1e9).scan()
        assert young.by_shm(name) is None
        assert f"1 unused file(s) in {folder} younger than 1e+09 s are not judged yet" in "\n".join(young.notes)
        old = Scanner(use_gpu=False, shm_dir=folder, shm_min_age_s=0).scan()
        assert old.by_shm(name) is not None and not any("not judged yet" in n for n in old.notes)
    finally:
        for entry in os.listdir(folder):
            os.unlink(f"{folder}/{entry}")
        os.rmdir(folder)


def test_a_replaced_semaphore_is_refused(semaphore_holder):
    name, proc = semaphore_holder
    _killed(proc)
    s = _scan().by_shm(name)
    os.unlink(f"/dev/shm/{name}")                              # someone makes a new one, same name
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    res = perform(s, policy=Policy())
    assert not res.ok and "was replaced since it was listed (inode changed)" in res.message
    assert os.path.exists(f"/dev/shm/{name}")


def test_the_cli_lists_a_leaked_semaphore_and_unlinks_it(semaphore_holder, run_env):
    name, proc = semaphore_holder
    _killed(proc)
    code, listing = cli_json(run_env, "--no-gpu", "--shm-min-age", "0")
    assert code == 0
    mine = [s for s in listing["suspects"] if s["key"] == f"shm:{name}"]
    assert len(mine) == 1 and mine[0]["reasons"][0]["code"] == "leaked-semaphore"
    assert mine[0]["evidence"]["semaphore"] is True
    text = cli(run_env, "--no-gpu", "--shm-min-age", "0").stdout
    assert f"/dev/shm/{name}  named semaphore" in text and "--unlink" in text
    res = cli(run_env, "--unlink", name, "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"[ok] unlink /dev/shm/{name}: unlinked" in res.stdout
    assert not wait_for(lambda: os.path.exists(f"/dev/shm/{name}"), timeout=0.1)


def test_the_default_threshold_is_one_constant():
    scanner = Scanner(use_gpu=False)
    assert scanner.shm_min_age_s == SHM_MIN_AGE_S
    from gpuscope.cli import build_parser

    args = build_parser(["cleanup"]).parse_args(["cleanup"])
    assert args.shm_min_age == SHM_MIN_AGE_S
