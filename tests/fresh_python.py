"""Run a piece of code in a fresh interpreter (what it imports at start, what it leaves in the
environment) and read back the JSON it prints last."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def bare_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` for ``python -S`` (no site, so nothing is loaded before the code: an editable
    install's finder loads ``re`` and ``pathlib`` into every interpreter), with gpuscope and its
    dependencies on PYTHONPATH instead."""
    return {**(os.environ if env is None else env),
            "PYTHONPATH": os.pathsep.join([str(REPO), *site.getsitepackages()])}


def fresh_json(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
               bare: bool = False) -> Any:
    """Run ``code`` in a fresh interpreter (``bare``: ``python -S``, see :func:`bare_env`)."""
    argv = [sys.executable, *(["-S"] if bare else []), "-c", code, *args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                         env=bare_env(env) if bare else env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
