"""Recognising processes by command line: multiprocessing and torch workers, inits, shm creators.

(nsys agents and their sessions: :mod:`gpuscope.procs.membership` and :mod:`gpuscope.nsys.agents`.)
"""

from __future__ import annotations

import os

from gpuscope.cleanup.snapshot import ProcInfo, ProcTable

# Processes that adopt orphans on purpose (PID 1 in containers, user-session subreapers).
KNOWN_REAPERS = {
    "systemd", "init", "tini", "tini-static", "dumb-init", "catatonit", "docker-init",
    "s6-svscan", "runit", "runsvdir", "openrc-init", "podman-init", "sinit",
    "containerd-shim", "conmon",
}
# PID 1 names that are known to reap adopted children.
REAPING_INITS = KNOWN_REAPERS


def worker_kind(proc: ProcInfo) -> str | None:
    """What kind of Python/torch worker ``proc`` is, judging by its command line and name."""
    cmd = " ".join(proc.cmdline)
    if "multiprocessing.spawn import spawn_main" in cmd or "--multiprocessing-fork" in cmd:
        return "multiprocessing spawn child"
    if "multiprocessing.resource_tracker import main" in cmd \
            or "multiprocessing.semaphore_tracker import main" in cmd:
        return "multiprocessing resource tracker"
    if "multiprocessing.forkserver import main" in cmd:
        return "multiprocessing forkserver (or a child it forked)"
    if proc.name == "pt_data_worker":
        return "PyTorch DataLoader worker"
    env = proc.environ
    if "TORCHELASTIC_RUN_ID" in env and "LOCAL_RANK" in env and not is_torchrun_agent(proc):
        return "torchrun worker"
    return None


def is_torchrun_agent(proc: ProcInfo) -> bool:
    cmd = " ".join(proc.cmdline)
    return (bool(proc.cmdline) and os.path.basename(proc.cmdline[0]) == "torchrun") \
        or "torch.distributed.run" in cmd or "torch.distributed.launch" in cmd \
        or any(os.path.basename(a) == "torchrun" for a in proc.cmdline[1:2])


def is_python(proc: ProcInfo) -> bool:
    if proc.name.startswith("python") or proc.name.startswith("pt_"):
        return True
    return bool(proc.cmdline) and os.path.basename(proc.cmdline[0]).startswith("python")


def reparented(proc: ProcInfo, table: ProcTable) -> str | None:
    """Why ``proc`` (a Python/torch worker, whose real parent is always a Python process)
    looks re-parented, or None when its parent still looks like the one that started it."""
    if proc.ppid == 1:
        return "re-parented to PID 1 (the process that started it is gone)"
    parent = table.get(proc.ppid)
    if parent is None:
        return None
    if parent.name in KNOWN_REAPERS:
        return f"re-parented to {parent.name} (pid {parent.pid}), a subreaper"
    if not is_python(parent) and not _python_ancestor(parent, table):
        return (f"its parent {parent.name} (pid {parent.pid}) is not a Python process, "
                "so it was adopted by a subreaper after its own parent exited")
    if proc.sid is not None and parent.sid is not None and proc.sid != parent.sid \
            and proc.sid != proc.pid:
        return (f"adopted by pid {parent.pid} ({parent.name}) from another session, "
                "so the parent that started it is gone")
    return None


def _python_ancestor(proc: ProcInfo, table: ProcTable) -> bool:
    """Whether a Python process is above ``proc`` (a wrapper script between a launcher and
    its worker is not an adopter)."""
    seen = set()
    cur = table.get(proc.ppid)
    while cur is not None and cur.pid not in seen and cur.pid > 1:
        if is_python(cur):
            return True
        seen.add(cur.pid)
        cur = table.get(cur.ppid)
    return False


def shm_creator(name: str) -> str | None:
    """Who usually creates a /dev/shm segment (or ``sem.*`` named semaphore) with this name."""
    if name.startswith("sem."):
        return _sem_creator(name[len("sem."):])
    if name.startswith("psm_"):
        return "Python multiprocessing.shared_memory"
    if name.startswith("torch_"):
        return "PyTorch tensor sharing (file_system strategy)"
    if name.startswith(("quadd-", "nsys", "NSys-")):
        return "Nsight Systems"
    if name.startswith("__KMP_REGISTERED_LIB_"):
        return "Intel/LLVM OpenMP runtime"
    if name.startswith("nccl-") or name.startswith("nccl"):
        return "NCCL"
    if name.startswith("cuda.shm") or name.startswith("cuda_"):
        return "CUDA IPC"
    return None


def _sem_creator(name: str) -> str:
    if name.startswith("mp-"):
        return "Python multiprocessing (a Lock, Semaphore, Event, Condition or Queue) named semaphore"
    if name.startswith("loky-"):
        return "joblib/loky named semaphore"
    if name.startswith(("nsys", "NSys-")):
        return "Nsight Systems named semaphore"
    return "POSIX named semaphore (sem_open)"


def resource_tracked(name: str) -> bool:
    """Whether multiprocessing's resource tracker may still unlink this /dev/shm name when its
    program exits: ``psm_*`` segments (shared_memory) and ``sem.mp-*`` semaphores (SemLock under
    spawn/forkserver), the names it registers."""
    return name.startswith(("psm_", "sem.mp-"))
