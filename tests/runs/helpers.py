"""Run the real `gpuscope` CLI in a subprocess (as a user would) and read its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def gpuscope(*args: str, env: dict[str, str], timeout: float = 120, cwd: str | None = None,
             **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], env=env, cwd=cwd,
                          capture_output=True, timeout=timeout, **kwargs)


def summary(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The JSON object `gpuscope run --json` prints on the last line of stdout."""
    last = proc.stdout.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode()
    try:
        return json.loads(last)
    except ValueError as exc:
        raise AssertionError(f"no JSON summary; stdout={proc.stdout!r} stderr={proc.stderr!r}") from exc


def script(name: str) -> str:
    return str(SCRIPTS / name)


def with_ranges(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in processes if p["ranges"] > 0]


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def env_without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("GPUSCOPE_TESTS", "1")
