"""Ray: the role of each Ray process and one range per Ray task and actor method call.

Loaded only in a process that imports ``ray`` (a post-import hook), never at start-up.

* Roles: Ray starts its Python processes as scripts of the ``ray`` package; the script names the
  role at start-up (``procname.ray_script_role``: ``default_worker.py`` -> ``ray worker``, ...).
  A worker becomes ``ray task worker`` when it runs a task (``ray_task``: the task's function) and
  ``ray actor`` when an actor is created in it (``ray_actor``: its class). A process that calls
  ``ray.init`` is a driver (``ray: "driver"``; its role stays ``main`` / ``rank N`` when it is the
  run's script). Ray's C++ processes (GCS, raylet) are named by their program (trace/process_rows.py).
* Ranges: ``FunctionActorManager`` hands each task's function (``get_execution_info``) and each
  actor method's executor (``_make_actor_method_executor``) to Ray's task loop; gpuscope wraps
  them so each call runs inside a range named after the function (kind ``task``, as pool tasks).
  Coroutine and generator methods are left alone (a range would only cover the call that
  creates the coroutine).
"""

import os
import sys

from .disguise import disguise
from .eventlog import STATE, safe
from .frames import hide_frames

DRIVER_KEEPS = ("main",)   # roles a driver keeps (and "rank N")
_done = {"installed": False}


@safe("Ray support")
def install(ray_module):
    """Called right after the program imports ``ray``."""
    if _done["installed"]:
        return
    _done["installed"] = True
    _patch_init(ray_module)
    fm = sys.modules.get("ray._private.function_manager")
    if fm is None:
        import importlib

        fm = importlib.import_module("ray._private.function_manager")
    _patch_function_manager(fm)


def _disguise(wrapper, original):
    """The wrapper looks like ``original``: name, module, qualname (pickling by reference), doc,
    attributes, signature (``__wrapped__``)."""
    import functools

    return functools.update_wrapper(wrapper, original)


def _patch_init(ray_module):
    original = getattr(ray_module, "init", None)
    if original is None or getattr(original, "__gpuscope__", False):
        return

    def init(*args, **kwargs):
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            hide_frames(exc)
            raise
        _became_driver(args, kwargs, result)
        return result

    init = _disguise(init, original)
    init.__gpuscope__ = True
    ray_module.init = init
    # pickled by reference as its module's attribute (ray._private.worker.init): that is the wrapper
    # too, so pickling ray.init finds the same object, and a process without gpuscope the original
    home = sys.modules.get(getattr(original, "__module__", "") or "")
    if home is not None and getattr(home, getattr(original, "__name__", ""), None) is original:
        setattr(home, original.__name__, init)


@safe("Ray driver")
def _became_driver(args, kwargs, context):
    address = kwargs.get("address", args[0] if args else None) or os.environ.get("RAY_ADDRESS")
    role = STATE.info.get("role", "")
    extra = {"ray": "driver", "ray_address": str(address) if address else "local"}
    info = getattr(context, "address_info", None)
    if isinstance(info, dict) and info.get("gcs_address"):
        extra["ray_gcs_address"] = str(info["gcs_address"])   # the object store probe asks it
        extra["ray_session_dir"] = str(info.get("session_dir") or "")
        if os.environ.get("RAY_AUTH_MODE"):   # ray.init sets it (token authentication)
            extra["ray_auth_mode"] = os.environ["RAY_AUTH_MODE"]
    if role not in DRIVER_KEEPS and not role.startswith("rank "):
        extra["role"] = "ray driver"
    STATE.update(**extra)


def _patch_function_manager(fm):
    manager = fm.FunctionActorManager
    get_info = manager.get_execution_info
    if getattr(get_info, "__gpuscope__", False):
        return
    wrapped = {}   # function_id -> (original function, its wrapper)

    def get_execution_info(self, job_id, function_descriptor):
        info = get_info(self, job_id, function_descriptor)
        try:
            if function_descriptor.is_actor_method():
                return info   # executors are wrapped when made (_make_actor_method_executor)
            key = function_descriptor.function_id
            entry = wrapped.get(key)
            if entry is None or entry[0] is not info.function:
                func = info.function
                name = _qualname(func, getattr(function_descriptor, "function_name", "") or info.function_name)
                entry = wrapped[key] = (func, _task_runner(func, name))
            return info._replace(function=entry[1])
        except Exception as exc:
            STATE.error("Ray task", exc)
            return info

    manager.get_execution_info = _disguise(get_execution_info, get_info)
    get_execution_info.__gpuscope__ = True

    make = manager._make_actor_method_executor

    def _make_actor_method_executor(self, method_name, method, *args, **kwargs):
        executor = make(self, method_name, method, *args, **kwargs)
        try:
            return _actor_runner(executor, method_name, method)
        except Exception as exc:
            STATE.error("Ray actor method", exc)
            return executor

    manager._make_actor_method_executor = _disguise(_make_actor_method_executor, make)

    load = manager.load_actor_class

    def load_actor_class(self, *args, **kwargs):
        cls = load(self, *args, **kwargs)
        _became_actor(cls)
        return cls

    manager.load_actor_class = _disguise(load_actor_class, load)


def _qualname(func, fallback):
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or fallback or "?"


def _plain(func):
    """A plain (not async, not generator) callable: a range around its call covers its work."""
    import inspect

    target = inspect.unwrap(func) if callable(func) else func
    return not (inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)
                or inspect.isgeneratorfunction(target))


def _task_runner(func, name):
    if not _plain(func):
        return func
    from .nvtxwrap import call_in_range

    def task(*args, **kwargs):
        _became_task_worker(name)
        try:
            return call_in_range("task", name, func, args, kwargs, flush=True)
        except BaseException as exc:
            hide_frames(exc)
            raise

    return disguise(task, func)


def _actor_runner(executor, method_name, method):
    if method_name.startswith("__ray") or not _plain(method):
        return executor
    from .nvtxwrap import call_in_range

    name = _qualname(method, method_name)

    def actor_method_executor(__ray_actor, *args, **kwargs):
        try:
            return call_in_range("task", name, executor, (__ray_actor,) + args, kwargs, flush=True)
        except BaseException as exc:
            hide_frames(exc)
            raise

    # Ray's task loop reads these (ray/_private/function_manager.py)
    for attr in ("name", "method", "__name__", "__qualname__", "__module__"):
        if hasattr(executor, attr):
            setattr(actor_method_executor, attr, getattr(executor, attr))
    actor_method_executor.__wrapped__ = executor
    return actor_method_executor


@safe("Ray task worker")
def _became_task_worker(name):
    info = STATE.info
    if info.get("role") == "ray actor" or info.get("ray_task") == name:
        return
    extra = {"ray_task": name}
    if info.get("role") in ("ray worker", "ray task worker", "subprocess"):
        extra["role"] = "ray task worker"
    STATE.update(**extra)


@safe("Ray actor")
def _became_actor(cls):
    name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", None) or "?"
    if STATE.info.get("role") == "ray actor" and STATE.info.get("ray_actor") == name:
        return
    STATE.update(role="ray actor", ray_actor=name)
