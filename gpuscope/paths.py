"""Where gpuscope keeps its files: the data directory, run folders, caches.

``GPUSCOPE_HOME`` overrides the platform data directory (tests and CI use it). Run data is
private: the data directory is 0700, and the first use in each process tightens what is in it
(folders 0700, files 0600), so runs recorded by older versions or with a loose umask are closed too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_tightened: set[str] = set()


def data_dir(tighten: bool = True) -> Path:
    """The root of gpuscope's data: the run store and one folder per run. ``tighten=False``: only
    the directory itself is made private now (``gpuscope run`` walks the rest once its program runs;
    the walk reads every file of every run)."""
    home = os.environ.get("GPUSCOPE_HOME")
    if home:
        path = Path(home).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("gpuscope", appauthor=False))
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if str(path) not in _tightened:
        if tighten:
            _tightened.add(str(path))
            make_private(path)
        else:
            _private_dir(path)
    return path


def _private_dir(path: Path) -> None:
    try:
        st = os.lstat(path)
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    except OSError:
        pass


def make_private(top: str | os.PathLike[str]) -> int:
    """Folders 0700 and files 0600 under ``top`` (itself included) that this user owns; returns how
    many were changed. Symbolic links are not followed. (What ``os.walk`` visits, read with one
    ``scandir`` per folder and one ``lstat`` per entry: every ``gpuscope run`` walks every run.)"""
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
            elif not entry.is_symlink():
                folders.append(entry.path)
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


def runs_dir(tighten: bool = True) -> Path:
    path = data_dir(tighten) / "runs"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def store_path() -> Path:
    return data_dir() / "gpuscope.sqlite"


def cache_dir() -> Path:
    """Downloaded tools (Nsight Systems) live here; ``GPUSCOPE_CACHE`` overrides it."""
    env = os.environ.get("GPUSCOPE_CACHE")
    if env:
        path = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(xdg) / "gpuscope"
    return path
