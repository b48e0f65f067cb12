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


def parse_ints(text: str, option: str) -> tuple[int, ...]:
    """``0,2`` as (0, 2); UserError naming ``option`` when it is not a list of whole numbers."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"{option} takes whole numbers separated by commas, not {text!r}") from None


def checked_ranks(ranks: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``--torch-profile-ranks``: None (all) or distinct ranks from 0."""
    if ranks is None:
        return None
    if not ranks or any(r < 0 for r in ranks):
        raise UserError(f"--torch-profile-ranks takes 'all' or ranks from 0 such as 0,2, not {ranks}")
    return tuple(sorted(set(ranks)))


def checked_schedule(steps: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``--torch-profile-schedule WAIT,WARMUP,ACTIVE[,REPEAT]`` (REPEAT 0: cycles until the end)."""
    if steps is None:
        return None
    if len(steps) not in (3, 4) or any(s < 0 for s in steps) or steps[2] < 1:
        raise UserError("--torch-profile-schedule takes WAIT,WARMUP,ACTIVE[,REPEAT] optimizer steps "
                        f"(ACTIVE at least 1, none negative), not {','.join(map(str, steps))}")
    return (*steps, 1) if len(steps) == 3 else tuple(steps)


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
