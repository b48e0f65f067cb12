"""Checks the launch panel shows before a run (Qt-free): does the script use CUDA or NVTX?

Forking a process that has initialised CUDA breaks CUDA in the child, and NVTX strings
registered before a fork are unknown to nsys in the child; the panel warns when ``fork`` is
chosen for such a script. This is a text scan of the script (imports and calls), a hint, not
a proof: a script may reach CUDA through a module it imports.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

_PATTERNS = (
    ("CUDA", re.compile(r"^\s*(import|from)\s+(torch|cupy|jax|numba\.cuda|pycuda|tensorflow|cuda)\b|\.cuda\(|"
                        r"torch\.cuda|device\s*=\s*['\"]cuda", re.M)),
    ("NVTX", re.compile(r"^\s*(import|from)\s+nvtx\b|\bnvtx\.|torch\.cuda\.nvtx", re.M)),
)


def gpu_features(script: str | Path, limit_bytes: int = 1 << 20) -> list[str]:
    """``["CUDA", "NVTX"]`` (the ones found) for a script file; ``[]`` if unreadable."""
    try:
        text = Path(script).read_bytes()[:limit_bytes].decode("utf-8", "replace")
    except OSError:
        return []
    return [name for name, pattern in _PATTERNS if pattern.search(text)]


def fork_warning(script: str | Path, start_method: str) -> str | None:
    """One line for the panel when fork is chosen for a CUDA/NVTX script, else None."""
    if start_method != "fork":
        return None
    found = gpu_features(script)
    if not found:
        return None
    parts = []
    if "CUDA" in found:
        parts.append("forked children cannot use a CUDA context made before the fork")
    if "NVTX" in found:
        parts.append("nsys sees the ranges of forked children only with --trace-fork-before-exec "
                     "(gpuscope sets it for fork runs)")
    return f"This script uses {' and '.join(found)}: {'; '.join(parts)}. spawn or forkserver is safer."


def default_python() -> str:
    """The interpreter a run uses when none is chosen: this one, unless gpuscope is a frozen app
    (PyInstaller), whose executable is not a Python: then the first python3 on PATH."""
    if getattr(sys, "frozen", False) or os.environ.get("GPUSCOPE_FROZEN"):
        return shutil.which("python3") or shutil.which("python") or "python3"
    return sys.executable

