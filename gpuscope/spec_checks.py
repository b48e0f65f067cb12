"""RunSpec's allowed values and the checks of its interpreter and script (used by
:meth:`gpuscope.spec.RunSpec.validated`)."""

from __future__ import annotations

import os
import shutil
import sys

from gpuscope.errors import UserError

START_METHODS = ("default", "fork", "spawn", "forkserver")
LAUNCHERS = ("python", "torchrun")
START_METHOD_HELP = {
    "default": "leave multiprocessing as the script and Python choose (fork on Linux up to 3.13)",
    "fork": "children are copies of the parent: fast start, but unsafe with CUDA or threads; "
            "nsys needs --trace-fork-before-exec to see them",
    "spawn": "children start a fresh interpreter: slower start, safe with CUDA; nsys sees them",
    "forkserver": "children fork from a clean server process: safe-ish and faster than spawn",
}
NSYS_TRACE = ("nvtx", "osrt", "cuda")   # NsysOptions' defaults
NSYS_TIMEOUT_S = 600.0


def default_python() -> str:
    """This interpreter; in a frozen (PyInstaller) app, whose executable is the app, python3 on PATH."""
    if getattr(sys, "frozen", False):
        return shutil.which("python3") or "python3"
    return sys.executable


def checked_python(python: str | None) -> str:
    python = python or default_python()
    if os.sep in python:
        resolved: str | None = python
    else:
        resolved = shutil.which(python)
    if not resolved or not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        raise UserError(f"Python interpreter not found or not executable: {python}")
    return os.path.abspath(resolved)


def checked_script(text: str, cwd: str | os.PathLike[str]) -> str:
    """The script's absolute, resolved path (a folder with ``__main__.py`` counts as a script)."""
    if not text:
        raise UserError("nothing to run: give a script or -m MODULE")
    script = os.path.join(cwd, os.path.expanduser(text))   # an absolute path stays as it is
    if not os.path.exists(script):
        raise UserError(f"script not found: {text}")
    if os.path.isdir(script):
        if not os.path.isfile(os.path.join(script, "__main__.py")):
            raise UserError(f"{text} is a directory without __main__.py, not a Python script")
    elif not looks_like_python(script):
        raise UserError(f"{text} does not look like a Python script (binary content)")
    return os.path.realpath(script)


def looks_like_python(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise UserError(f"cannot read {os.fspath(path)}: {exc.strerror}") from None
    return b"\x00" not in head
