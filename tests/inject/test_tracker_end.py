"""multiprocessing's resource tracker under gpuscope ends as it would without it: it warns about
and unlinks what the program leaked and exits with its own status, on every interpreter at hand;
its exit handlers run (a .pth file's, e.g. coverage's) and its interpreter is torn down as usual
(objects of a user's sitecustomize or of a .pth file's module get their ``__del__``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.trace.events import ProcessEvents, read_run_events
from tests.inject.conftest import injected_env, make_bare_python, site_packages

LEAK = str(Path(__file__).resolve().parents[1] / "findings" / "scripts" / "shm_leak.py")


def _pythons() -> list[str]:
    found = [sys.executable]
    for version in ("3.10.13", "3.12.1", "3.13.0"):
        path = os.path.expanduser(f"~/.pyenv/versions/{version}/bin/python")
        if os.path.exists(path):
            found.append(path)
    return found


def _by_role(run_dir: Path) -> dict[str, ProcessEvents]:
    """The run's main process and resource tracker, as gpuscope reads their logs."""
    return {pe.role: pe for pe in read_run_events(run_dir) if pe.role in ("main", "resource tracker")}


def _tracker_exit(run_dir: Path, timeout_s: float = 30.0) -> dict:
    """The resource tracker's exit record (it ends after the program: waited for here)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tracker = _by_role(run_dir).get("resource tracker")
        if tracker is not None and tracker.exit is not None:
            return tracker.exit
        time.sleep(0.05)
    raise AssertionError(f"no exit record of a resource tracker in {run_dir}")


def _run_leak(python: str, run_dir: Path) -> tuple[str, dict]:
    run_dir.mkdir(exist_ok=True)   # as gpuscope makes it before the program (main.claim goes there)
    out = subprocess.run([python, LEAK], env=injected_env(run_dir, GPUSCOPE_SCRIPT=LEAK), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # the tracker holds the program's stderr: its warning is in what was read to the pipe's end
    assert "leaked shared_memory objects" in out.stderr, out.stderr[-2000:]
    name = out.stdout.split("created ", 1)[1].split()[0]
    return name, _tracker_exit(run_dir)


def _marks(python: str, run_dir: Path, marks: Path) -> dict[str, str | None]:
    """Run the leaking program; what its main process and its resource tracker wrote in ``marks``
    (a file named after each one's pid) by the time they ended, or None."""
    _run_leak(python, run_dir)
    pids = {role: pe.pid for role, pe in _by_role(run_dir).items()}
    assert set(pids) == {"main", "resource tracker"}, pids
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.02)   # ended (the tracker is reaped by init)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids.values()), "the program did not end"
    return {role: (marks / str(p)).read_text() if (marks / str(p)).exists() else None for role, p in pids.items()}


@pytest.mark.parametrize("python", _pythons())
def test_the_tracker_still_warns_unlinks_and_exits_as_it_would(tmp_path, python):
    version = tuple(int(p) for p in subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                                                   capture_output=True, text=True).stdout.split())
    name, record = _run_leak(python, tmp_path)
    # 3.13 ends its tracker with sys.exit(1) after a leak; older ones return (0)
    assert (record["exit_code"], record["how"]) == ((1, "sys.exit") if version >= (3, 13) else (0, "end")), record
    deadline = time.monotonic() + 10
    while os.path.exists("/dev/shm/" + name.lstrip("/")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists("/dev/shm/" + name.lstrip("/")), "the tracker did not unlink the leaked segment"
    assert not (tmp_path / "inject-errors.log").exists()


# files put in an interpreter's site-packages and what they make every process of it write at its end
MARK_MODULE = ("import os\n"
               "class _Mark:\n"
               "    def __del__(self, path=os.path.join({marks!r}, str(os.getpid())), open=open):\n"
               "        open(path, 'w').write('torn down')\n"
               "_mark = _Mark()\n")
SITE_FILES = {
    # a .pth file's code runs before any sitecustomize: its exit handler is registered before ours
    "exit handler of a .pth file": ({"zz-exit-handler.pth": "import atexit, os; atexit.register(lambda: open("
                                     "os.path.join({marks!r}, str(os.getpid())), 'w').write('ran'))\n"}, "ran"),
    # the user's sitecustomize (chained by gpuscope's) leaves an object whose __del__ runs at teardown
    "user sitecustomize": ({"sitecustomize.py": MARK_MODULE}, "torn down"),
    # the same object made by a module a .pth line imports
    "object of a .pth file's module": ({"gs_test_mark.py": MARK_MODULE, "zz-object.pth": "import gs_test_mark\n"},
                                       "torn down"),
}


@pytest.mark.parametrize("case", sorted(SITE_FILES))
def test_what_runs_at_the_trackers_end_with_site_files(tmp_path, case):
    """A .pth file's exit handler (registered before gpuscope's, so run after it), a user
    sitecustomize's objects and a .pth file's module's objects (torn down with the interpreter) get
    their turn in the tracker as in the main process: gpuscope does not cut the tracker's end short."""
    files, mark = SITE_FILES[case]
    venv = tmp_path / "venv"
    python = make_bare_python(venv)
    marks = tmp_path / "marks"
    marks.mkdir()
    for name, text in files.items():
        Path(site_packages(venv), name).write_text(text.format(marks=str(marks)))
    got = _marks(python, tmp_path / "run", marks)
    assert got == {"main": mark, "resource tracker": mark}, got
