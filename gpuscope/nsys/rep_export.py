"""Turn a ``.nsys-rep`` into the SQLite export the reader reads (``nsys export``, bounded)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from gpuscope.errors import UserError
from gpuscope.nsys.reader import version_tuple


def sqlite_for_rep(rep: Path) -> Path:
    """Where the export of ``rep`` goes: beside it if that folder is writable, else the cache."""
    from gpuscope import paths

    beside = rep.with_suffix(".sqlite")
    if os.access(rep.parent, os.W_OK) and (not beside.exists() or os.access(beside, os.W_OK)):
        return beside
    digest = hashlib.sha1(str(rep.resolve()).encode()).hexdigest()[:16]
    folder = paths.cache_dir() / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{rep.stem}-{digest}.sqlite"


def rep_version(rep: Path) -> str | None:
    """The nsys version that wrote a .nsys-rep: its "2023.4.4.54-<build>" string (first 4 MB)."""
    with open(rep, "rb") as fh:
        head = fh.read(4 << 20)
    m = re.search(rb"(20[2-9]\d\.\d+\.\d+\.\d+)-[0-9a-f]{6,}", head)
    return m.group(1).decode() if m else None


def export_rep(rep: Path, timeout_s: float = 300.0, cancel: threading.Event | None = None) -> Path:
    """Export ``rep`` to SQLite with the located nsys (the same release if available); reuse a fresh one."""
    out = sqlite_for_rep(rep)
    if out.exists() and out.stat().st_mtime >= rep.stat().st_mtime and out.stat().st_size > 0:
        return out
    install = pick_nsys(rep_version(rep))
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.partial.sqlite")   # never leave a half export as X.sqlite
    cmd = [str(install.nsys), "export", "--type", "sqlite", "-f", "true", "-o", str(tmp), str(rep)]
    try:
        _run_bounded(cmd, timeout_s, env=install.tool_env(), what=str(rep), cancel=cancel)
        if not tmp.exists():
            raise UserError(f"{rep}: nsys export wrote no {tmp.name}")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def pick_nsys(version: str | None):
    """The nsys to export a report written by ``version``: that release, else the oldest newer one.

    A .nsys-rep is forward compatible, the SQLite schema is not: the same release gives the
    export whose summaries match that release's ``nsys stats``.
    """
    from gpuscope.nsys import locate

    installs = locate.list_installs()
    if not installs:
        raise UserError("reading a .nsys-rep needs Nsight Systems and none was found: run "
                        "scripts/provision_nsys.py or set GPUSCOPE_NSYS (or give the .sqlite export)")
    want = version_tuple(version)
    if not want:
        return installs[0]
    same = [i for i in installs if i.version_tuple[:2] == want[:2]]
    newer = sorted((i for i in installs if i.version_tuple >= want), key=lambda i: i.version_tuple)
    if same or newer:
        return (same or newer)[0]
    have = ", ".join(i.version for i in installs)
    raise UserError(f"this report was written by nsys {version} and only older nsys were found ({have}); "
                    "install that release or a newer one")


def _run_bounded(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None, *, what: str = "",
                 cancel: threading.Event | None = None) -> None:
    """Run an nsys step in its own process group; on timeout or ``cancel`` kill the whole group."""
    full_env = env if env is not None else dict(os.environ)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, encoding="utf-8", errors="replace",
                            start_new_session=True, env=full_env)
    prefix = f"{what}: " if what else ""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            output, _ = proc.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            cancelled = cancel is not None and cancel.is_set()
            if cancelled or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                if cancelled:
                    raise UserError(f"{prefix}cancelled") from None
                raise UserError(f"{prefix}'{' '.join(cmd[:2])}' did not finish within {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        last = (output or "").strip().splitlines()[-1:] or ["no output"]
        clean = "".join(c if c.isprintable() else "?" for c in last[0])[:200]
        raise UserError(f"{prefix}nsys export failed (exit {proc.returncode}): {clean}")


