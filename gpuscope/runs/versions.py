"""The versions recorded with a run (``spec.json`` and the store): gpuscope, Python, the platform,
the host and gpuscope's command line.

``platform.platform()`` runs ``uname -p`` (a process) at every run. Its answers (with the Python
version and host name) are kept in the data folder, keyed by everything they are computed from:
the interpreter (path and ``sys.version``), ``os.uname()`` and the C library's version; when any
of them changes they are computed again.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from gpuscope import __version__, paths

if TYPE_CHECKING:
    from gpuscope.spec import RunSpec

CACHE = "platform-cache.json"


def versions(spec: RunSpec) -> dict[str, Any]:
    here = platform_facts()
    return {
        "gpuscope": __version__,
        "python": here["python"],
        "target_python": spec.python,
        "platform": here["platform"],
        "host": here["host"],
        "argv": sys.argv,
    }


def platform_facts() -> dict[str, str]:
    """``platform``'s python_version(), platform() and node(), from the data folder's copy when it
    was made for this interpreter, kernel and C library."""
    key = _key()
    path = os.path.join(paths.data_root(tighten=False), CACHE)
    try:
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
        if saved.get("key") == key:
            return {k: str(saved[k]) for k in ("python", "platform", "host")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    import platform   # what the cache saves: this import and its `uname -p`

    facts = {"python": platform.python_version(), "platform": platform.platform(), "host": platform.node()}
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps({"key": key, **facts}))
        os.replace(tmp, path)
    except OSError:
        pass
    return facts


def _key() -> list[Any]:
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        libc = None
    return [sys.executable, sys.version, list(os.uname()), libc]
