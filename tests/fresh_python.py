"""Run a piece of code in a fresh interpreter (what it imports at start, what it leaves in the
environment) and read back the JSON it prints last."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def fresh_json(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                         env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
