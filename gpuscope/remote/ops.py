"""The agent's op table (docs/REMOTE.md, "Ops of version 1"): each op takes a :class:`Call` and
returns plain JSON data; a bad argument is a UserError (one line on the workstation).

Ops reach the core through :mod:`gpuscope.api` and the existing modules, imported when called so
the agent starts fast. Detached runs (``start_run``, ``watch_run``, ``stop_run``, ``active_runs``)
are :mod:`gpuscope.remote.runhost`; ``exec`` is :mod:`gpuscope.remote.execop`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuscope.errors import UserError
from gpuscope.remote import coreops, flowops, protocol, seriesops, timelineops
from gpuscope.remote.call import Call, hello

READ_MAX = 4 << 20   # one read_file answer: a download is many of them, resumable by offset


def arg(call: Call, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """One argument of the call, type-checked (a missing or wrong one is a UserError)."""
    return call.arg(name, kind, default)


def op_hello(call: Call) -> Any:
    return hello()


def op_exec(call: Call) -> Any:
    from gpuscope.remote import execop

    return execop.run(call)


def op_start_run(call: Call) -> Any:
    from gpuscope.remote import runwatch

    return runwatch.start_run(call)


def op_watch_run(call: Call) -> Any:
    from gpuscope.remote import runwatch

    return runwatch.watch_run(call)


def op_stop_run(call: Call) -> Any:
    from gpuscope.remote import runwatch

    return runwatch.stop_run(call)


def op_active_runs(call: Call) -> Any:
    from gpuscope.remote import runwatch

    return runwatch.active_runs(call)


def op_list_dir(call: Call) -> Any:
    path = Path(os.path.expanduser(arg(call, "path", str, "~") or "~"))
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except FileNotFoundError:
        raise UserError(f"no such folder: {path}") from None
    except NotADirectoryError:
        raise UserError(f"not a folder: {path}") from None
    except PermissionError:
        raise UserError(f"not allowed to read the folder {path}") from None
    rows = []
    for entry in entries:
        try:
            is_dir = entry.is_dir()
            size = 0 if is_dir else entry.stat().st_size
        except OSError:
            is_dir, size = False, 0
        rows.append({"name": entry.name, "dir": is_dir, "size": size})
    return {"path": str(path.resolve()), "entries": rows}


def op_read_file(call: Call) -> Any:
    path = os.path.expanduser(arg(call, "path", str))
    offset = arg(call, "offset", int, 0) or 0
    length = min(arg(call, "length", int, READ_MAX) or READ_MAX, READ_MAX)
    if offset < 0 or length < 0:
        raise UserError("read_file: offset and length are not negative")
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(offset)
            data = fh.read(length)
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UserError(f"a folder, not a file: {path}") from None
    except PermissionError:
        raise UserError(f"not allowed to read {path}") from None
    return {"b64": protocol.b64(data), "size": size, "offset": offset}


OPS: dict[str, Callable[[Call], Any]] = {
    "hello": op_hello,
    "exec": op_exec,
    "list_dir": op_list_dir,
    "read_file": op_read_file,
    "start_run": op_start_run,
    "watch_run": op_watch_run,
    "stop_run": op_stop_run,
    "active_runs": op_active_runs,
    **{name: getattr(coreops, name) for name in coreops.__all__},
    **{name: getattr(timelineops, name) for name in timelineops.__all__},
    **{name: getattr(flowops, name) for name in flowops.__all__},
    **{name: getattr(seriesops, name) for name in seriesops.__all__},
}
