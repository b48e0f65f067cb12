"""Where gpuscope keeps its files: the data directory, run folders, caches.

``GPUSCOPE_HOME`` overrides the platform data directory (tests and CI use it).
"""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """The root of gpuscope's data: the run store and one folder per run."""
    home = os.environ.get("GPUSCOPE_HOME")
    if home:
        path = Path(home).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("gpuscope", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    path = data_dir() / "runs"
    path.mkdir(parents=True, exist_ok=True)
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
