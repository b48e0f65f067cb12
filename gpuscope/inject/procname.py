"""Give processes a name that ps, top and nsys show (Linux: the main thread's comm, 15 bytes)."""

import os

from .procself import write_comm


def set_process_name(name):
    return write_comm(name)


# (module, function) of a multiprocessing child's target -> its role
TARGET_ROLES = {
    ("multiprocessing.pool", "worker"): "pool worker",
    ("concurrent.futures.process", "_process_worker"): "executor worker",
    ("joblib.externals.loky.process_executor", "_process_worker"): "loky worker",
    ("loky.process_executor", "_process_worker"): "loky worker",
    ("multiprocessing.managers", "_run_server"): "manager",
    ("torch.utils.data._utils.worker", "_worker_loop"): "DataLoader worker",
}
# roles of processes that run a pool's tasks: a later, generic "pool worker" does not replace them
WORKER_ROLES = ("pool worker", "executor worker", "loky worker", "DataLoader worker")


# the script of a Ray process (its path inside the ray package) -> its role (docs/RAY.md)
RAY_SCRIPT_ROLES = (
    ("_private/workers/default_worker.py", "ray worker"),
    ("dashboard/dashboard.py", "ray dashboard"),
    ("dashboard/agent.py", "ray dashboard agent"),
    ("_private/runtime_env/agent/main.py", "ray runtime env agent"),
    ("autoscaler/_private/monitor.py", "ray monitor"),
    ("_private/log_monitor.py", "ray log monitor"),
    ("_private/workers/setup_worker.py", "ray worker setup"),
)
RAY_MODULE_ROLES = {"ray.util.client.server": "ray client server"}   # python -m MODULE


def ray_script_role(argv):
    """The role of a Ray process from its command line (``python [-u] .../ray/<script>``), or None."""
    for i, arg in enumerate(argv[1:3], 1):
        if arg == "-m":
            return RAY_MODULE_ROLES.get(argv[i + 1] if i + 1 < len(argv) else "")
        if arg.startswith("-"):
            continue
        if "/ray/" not in arg:
            return None
        for suffix, role in RAY_SCRIPT_ROLES:
            if arg.endswith("/ray/" + suffix):
                return role
        return None
    return None


def target_role(proc):
    """The role of a multiprocessing child from its Process object's target (the parent knows it
    at ``start()``; the child once it has unpickled that object)."""
    target = getattr(proc, "_target", None)
    module = getattr(target, "__module__", "") or ""
    fname = getattr(target, "__name__", "") or ""
    role = TARGET_ROLES.get((module, fname))
    if role is None:  # by name alone, as before: a wrapped or vendored copy
        role = {"worker": "pool worker", "_process_worker": "loky worker" if "loky" in module
                else "executor worker", "_run_server": "manager"}.get(fname, "process child")
    return role


def child_role(proc):
    """(role, index, extra identity) of a starting multiprocessing child, from its Process object."""
    target = getattr(proc, "_target", None)
    fname = getattr(target, "__name__", "") or ""
    role = target_role(proc)
    name = getattr(proc, "name", "") or ""
    index = name.rsplit("-", 1)[-1] if "-" in name else None
    index = index if index and index.isdigit() else None
    extra = {"target": fname or None}
    if role == "DataLoader worker":
        worker_id = _argument(target, proc, "worker_id")
        if isinstance(worker_id, int):
            index = str(worker_id)
            extra["worker_id"] = worker_id
    return role, index, extra


def _argument(target, proc, name):
    """The value the child's target gets for parameter ``name`` (None if it cannot be bound)."""
    try:
        import inspect

        bound = inspect.signature(target).bind_partial(*getattr(proc, "_args", ()), **getattr(proc, "_kwargs", {}))
        return bound.arguments.get(name)
    except (TypeError, ValueError):
        return None


def short_role(role, rank=None, index=None):
    """A compact, recognisable name: gs:main, gs:rank0, gs:pool3, gs:r1.pool2, gs:dl0, gs:fksrv ..."""
    base = {
        "main": "main", "pool worker": "pool", "process child": "proc", "forkserver": "fksrv",
        "resource tracker": "track", "torchrun agent": "agent", "fork child": "fork",
        "spawn child": "spawn", "subprocess": "sub", "manager": "mgr", "executor worker": "exec",
        "loky worker": "loky", "DataLoader worker": "dl",
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


def name_python_threads(threading_module):
    """Give each new ``threading.Thread`` its Python name as OS thread name (nsys, top -H, ps -L).

    Python before 3.14 leaves OS thread names as the process name. Costs one small write to /proc
    per thread start.
    """
    thread = threading_module.Thread
    original = getattr(thread, "_set_native_id", None)
    if original is None or getattr(original, "__gpuscope__", False):
        return

    def _set_native_id(self):
        original(self)
        try:
            if self._native_id == os.getpid():  # the main thread: its OS name is the process name
                return
            write_comm(str(self.name), self._native_id)
        except (OSError, AttributeError, TypeError):
            pass

    _set_native_id.__gpuscope__ = True
    _set_native_id.__wrapped__ = original
    thread._set_native_id = _set_native_id
