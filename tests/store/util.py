"""Helpers for the store tests: real `gpuscope` commands in subprocesses, damaged store files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

PY = sys.executable
QUICK = "import sys; print('quick', sys.argv[1:])\n"
# Writes <dir>/started, then waits (at most 60 s) for <dir>/go before it ends.
GATED = """import os, sys, time
d = sys.argv[1]
open(os.path.join(d, "started"), "w").close()
end = time.time() + 60
while not os.path.exists(os.path.join(d, "go")) and time.time() < end:
    time.sleep(0.05)
print("gated done")
"""


def gpuscope(env: dict[str, str], *args: str, timeout: float = 120, cwd: str | None = None,
             ) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gpuscope", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def history(env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[dict]]:
    res = gpuscope(env, "history", "--json", "--limit", "1000")
    assert res.returncode == 0, res.stdout + res.stderr
    return res, json.loads(res.stdout)


def write_script(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def damage_bytes(store: Path, offset: int, size: int = 4096, seed: int = 15) -> None:
    """Write ``size`` random bytes into the store at ``offset``."""
    import random

    data = random.Random(seed).randbytes(size)
    with open(store, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def quick_check(store: Path) -> str:
    """SQLite's own verdict on a file ('ok' or its first complaint), independent of gpuscope."""
    try:
        with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as conn:
            return conn.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        return str(exc)


def damaged_copies(home: Path) -> list[Path]:
    return sorted(p for p in home.glob("gpuscope.sqlite.damaged-*") if not p.name.endswith(("-wal", "-shm")))


def wait_for(path: Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} did not appear"
        time.sleep(0.05)


def env_without_pythonpath(env: dict[str, str]) -> dict[str, str]:
    out = dict(env)
    out.pop("PYTHONPATH", None)
    return out


def store_of(home: Path) -> Path:
    return home / "gpuscope.sqlite"


def exists_all(paths: list[str]) -> bool:
    return all(os.path.exists(p) for p in paths)
