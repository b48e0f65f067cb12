"""Where gpuscope keeps its files: the data directory, run folders, caches.

``GPUSCOPE_HOME`` overrides the platform data directory (tests and CI use it). Run data is
private: the data directory is 0700, and what is in it is tightened (folders 0700, files 0600) by a
walk of the whole folder the first time this version of gpuscope uses it, so runs recorded by
older versions or with a loose umask are closed too; each run's own folder is tightened again when
the run is recorded (``gpuscope.store.runs``). The walk reads every file of every run, so it is not
repeated by every command: the file ``.private`` records that it was done (docs/STORE.md).

On Linux the data folder is found without ``platformdirs`` (the XDG rule, a few lines):
``gpuscope run`` reserves its run folder before it starts the program (docs/RUN-ENGINE.md).
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from pathlib import Path

_tightened: set[str] = set()
# Written in the data folder once the whole folder was made private (the number: what that walk
# covers; a later version that must walk again raises it).
PRIVATE_MARK = ".private"
PRIVATE_VERSION = "1"


def as_path(text: str | os.PathLike[str]) -> Path:
    """``Path(text)``."""
    return Path(text)


def default_data_root(environ: dict[str, str] | os._Environ[str] | None = None) -> str:
    """The platform's data folder for gpuscope: on Linux ``$XDG_DATA_HOME/gpuscope``, or
    ``~/.local/share/gpuscope`` when that is unset or not absolute (the XDG Base Directory rule),
    as ``platformdirs.user_data_dir("gpuscope", appauthor=False)`` says (tests/runs/test_paths.py
    compares them), without importing it before the program starts. Elsewhere platformdirs answers."""
    env = os.environ if environ is None else environ
    if sys.platform.startswith("linux") and not hasattr(sys, "getandroidapilevel"):
        base = env.get("XDG_DATA_HOME", "")
        if not os.path.isabs(base):
            home = env.get("HOME", "")
            if not os.path.isabs(home):   # unset or relative: the account's home, as platformdirs
                home = pwd.getpwuid(os.getuid()).pw_dir
            base = os.path.join(home, ".local", "share")
        return os.path.join(base, "gpuscope")
    import platformdirs   # elsewhere only: not before the program starts on Linux

    return platformdirs.user_data_dir("gpuscope", appauthor=False)


def data_root(tighten: bool = True) -> str:
    """:func:`data_dir` as a string."""
    home = os.environ.get("GPUSCOPE_HOME")
    path = os.path.expanduser(home) if home else default_data_root()
    os.makedirs(path, mode=0o700, exist_ok=True)
    if path not in _tightened:
        if tighten:
            _tightened.add(path)
            _private_dir(path)
            if not _marked_private(path):
                make_private(path)
                _mark_private(path)
        else:
            _private_dir(path)
    return path


def data_dir(tighten: bool = True) -> Path:
    """The root of gpuscope's data: the run store and one folder per run. ``tighten=False``: only
    the directory itself is made private now (``gpuscope run`` tightens the rest once its program
    runs)."""
    return as_path(data_root(tighten))


def _marked_private(root: str) -> bool:
    try:
        with open(os.path.join(root, PRIVATE_MARK), encoding="utf-8") as fh:   # utf-8: its codec is loaded
            return fh.read().strip() == PRIVATE_VERSION
    except (OSError, ValueError):
        return False


def _mark_private(root: str) -> None:
    try:
        fd = os.open(os.path.join(root, PRIVATE_MARK), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(PRIVATE_VERSION + "\n")
    except OSError:
        pass   # walked again next time


def _private_dir(path: str | os.PathLike[str]) -> None:
    try:
        st = os.lstat(path)
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    except OSError:
        pass


def make_private(top: str | os.PathLike[str]) -> int:
    """Folders 0700 and files 0600 under ``top`` (itself included) that this user owns; returns how
    many were changed. Symbolic links are not followed. (What ``os.walk`` visits, read with one
    ``scandir`` per folder and one ``lstat`` per entry.)"""
    changed = 0
    uid = os.getuid()
    folders = [os.fspath(top)]
    while folders:
        root = folders.pop()
        try:
            with os.scandir(root) as it:
                entries = list(it)
        except OSError:
            continue      # as os.walk: a folder it cannot list is left alone
        checks = [(root, 0o700)]
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if not is_dir:
                checks.append((entry.path, 0o600))
            elif not entry.is_symlink() and not (root == os.fspath(top) and entry.name == "agent"):
                folders.append(entry.path)   # agent/: the remote agent's virtual environments keep their modes
        for name, want in checks:
            try:
                st = os.lstat(name)
                if st.st_uid != uid or stat.S_ISLNK(st.st_mode):
                    continue
                if stat.S_IMODE(st.st_mode) & 0o077:
                    os.chmod(name, stat.S_IMODE(st.st_mode) & want)
                    changed += 1
            except OSError:
                continue
    return changed


def runs_root(tighten: bool = True) -> str:
    """:func:`runs_dir` as a string."""
    path = os.path.join(data_root(tighten), "runs")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def runs_dir(tighten: bool = True) -> Path:
    return as_path(runs_root(tighten))


def store_file() -> str:
    """:func:`store_path` as a string."""
    return os.path.join(data_root(), "gpuscope.sqlite")


def store_path() -> Path:
    return as_path(store_file())


def cache_dir() -> Path:
    """Downloaded tools (Nsight Systems) live here; ``GPUSCOPE_CACHE`` overrides it."""
    env = os.environ.get("GPUSCOPE_CACHE")
    if env:
        path = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(xdg) / "gpuscope"
    return path
