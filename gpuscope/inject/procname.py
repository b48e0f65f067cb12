"""Give processes a name that ps, top and nsys show (Linux: the main thread's comm, 15 bytes)."""

import os


def set_process_name(name):
    name = name[:15]
    try:
        with open("/proc/self/comm", "w") as fh:
            fh.write(name)
        return True
    except OSError:
        return False


def short_role(role, rank=None, index=None):
    """A compact, recognisable name: gs:main, gs:rank0, gs:pool3, gs:r1.pool2, gs:fksrv ..."""
    base = {
        "main": "main", "pool worker": "pool", "process child": "proc", "forkserver": "fksrv",
        "resource tracker": "track", "torchrun agent": "agent", "fork child": "fork",
        "spawn child": "spawn", "subprocess": "sub", "manager": "mgr",
    }.get(role, "rank" if role.startswith("rank") else "py")
    if role.startswith("rank") and rank is not None:
        return "gs:rank%s" % rank
    text = base + (str(index) if index is not None else "")
    if rank is not None:
        text = "r%s.%s" % (rank, text)
    return "gs:" + text


def env_rank():
    value = os.environ.get("RANK")
    if value is None or not (os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("GROUP_RANK")):
        return None
    try:
        return int(value)
    except ValueError:
        return None
