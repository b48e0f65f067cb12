"""``--annotate __main__:NAME``: wrap the script's functions before their first call.

The script is never "imported", so no post-import hook sees its functions appear. Instead the
hook watches the lines of the script's top-level code (only those): before each top-level
statement runs, the functions defined so far that a pattern names are wrapped, so a call made by
that statement (``main()``, ``work()``) already goes through the wrapper.

* Python >= 3.12: ``sys.monitoring`` LINE events for the module's code object alone: a callback
  per top-level line, nothing for any other code, for the whole run.
* Python <= 3.11: ``sys.settrace`` until a top-level statement first calls Python code other
  than an import (usually ``main()``, or a library call): the functions defined by then are
  wrapped and tracing stops for good. Functions defined later are wrapped at the next point
  gpuscope gets control (pool, process or executor creation). Imports at the top of the script
  run traced (slower, only with a ``__main__`` pattern, only on these versions).

Used only in the process that runs the script (role ``main`` or a torchrun rank), only when a
pattern names ``__main__`` / the script's module, and never over a tracer the program set itself.
"""

import sys

from . import annotate_patterns
from .eventlog import STATE

_TOOL_NAME = "gpuscope --annotate"
_CO_OPTIMIZED = 0x0001
_state = {"frame": None, "code": None, "tool": None}


def start():
    """Install the watcher (called from the hook, before the script starts)."""
    if not annotate_patterns.main_patterns():
        return
    try:
        if hasattr(sys, "monitoring"):
            _start_monitoring(sys.monitoring)
        elif sys.gettrace() is None:
            sys.settrace(_on_call)
    except Exception as exc:
        STATE.error("--annotate __main__ watcher", exc)


def _main_dict():
    main = sys.modules.get("__main__")
    return getattr(main, "__dict__", None)


def _is_main_module_code(code, globals_):
    return code.co_name == "<module>" and globals_ is _main_dict()


# -- Python >= 3.12 ------------------------------------------------------------------------------
def _start_monitoring(mon):
    for tool in (5, 4, 3):  # ids not reserved for debuggers/coverage/profilers
        if mon.get_tool(tool) is None:
            break
    else:
        return
    mon.use_tool_id(tool, _TOOL_NAME)
    _state["tool"] = tool
    mon.register_callback(tool, mon.events.PY_START, _on_py_start)
    mon.register_callback(tool, mon.events.LINE, _on_line_event)
    mon.set_events(tool, mon.events.PY_START)


def _on_py_start(code, _offset):
    mon = sys.monitoring
    try:
        if _is_main_module_code(code, sys._getframe(1).f_globals):
            tool = _state["tool"]
            mon.set_events(tool, 0)
            mon.set_local_events(tool, code, mon.events.LINE)
            _state["code"] = code
            return None
    except Exception as exc:
        STATE.error("--annotate __main__ watcher", exc)
    return mon.DISABLE


def _on_line_event(code, _line):
    if code is _state["code"]:
        annotate_patterns.apply_to_main()
    return None


# -- Python <= 3.11 ------------------------------------------------------------------------------
def _on_call(frame, event, _arg):
    try:
        main_frame = _state["frame"]
        if main_frame is None:
            if _is_main_module_code(frame.f_code, frame.f_globals):
                _state["frame"] = frame
                return _on_line
            return None
        if frame.f_back is main_frame and not _keeps_tracing(frame, main_frame):
            # a top-level statement calls into Python code: wrap what exists, stop tracing
            annotate_patterns.apply_to_main()
            _stop()
    except Exception as exc:
        STATE.error("--annotate __main__ watcher", exc)
        _stop()
    return None


def _keeps_tracing(frame, main_frame):
    """Imports and class bodies at the top of the script: the definitions are still to come."""
    code = frame.f_code
    if code.co_filename.startswith("<frozen importlib"):
        return True
    return frame.f_globals is main_frame.f_globals and not code.co_flags & _CO_OPTIMIZED


def _on_line(frame, event, _arg):
    if event == "line":
        annotate_patterns.apply_to_main()
    elif event == "return":
        _stop()
    return _on_line


def _stop():
    frame = _state["frame"]
    if frame is not None:
        frame.f_trace = None
    _state["frame"] = None
    if sys.gettrace() is _on_call:
        sys.settrace(None)
