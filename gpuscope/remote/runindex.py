"""The index of detached runs that are running on this host: one small JSON file per run in the
data folder, written by the run's host process and removed when it ends. An entry whose process
is gone (killed, the machine restarted) is stale: ignored and removed by the next reader."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuscope.procs.read import alive

__all__ = ["Entry", "active_entries", "add_entry", "find_entry", "remove_entry", "socket_path"]

SOCKET_PATH_MAX = 100   # sun_path is 108 bytes on Linux


@dataclass
class Entry:
    """One active detached run: where it is, who hosts it, where its live stream is served."""

    run_id: str
    run_dir: str
    started_ns: int
    argv: list[str] = field(default_factory=list)
    pid: int = 0             # the run's host process
    socket: str = ""
    program_pid: int | None = None   # the program's main process

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Entry:
        return cls(run_id=str(d["run_id"]), run_dir=str(d["run_dir"]), started_ns=int(d.get("started_ns") or 0),
                   argv=[str(a) for a in d.get("argv") or ()], pid=int(d.get("pid") or 0),
                   socket=str(d.get("socket") or ""),
                   program_pid=int(d["program_pid"]) if d.get("program_pid") else None)


def index_dir() -> Path:
    from gpuscope import paths

    path = paths.data_dir() / "remote" / "active"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def socket_path(pid: int) -> str:
    """Where a run host serves: the user's runtime folder (or the temp folder), a private folder."""
    for base in (os.environ.get("XDG_RUNTIME_DIR") or "", tempfile.gettempdir()):
        if not base or not os.path.isdir(base):
            continue
        folder = os.path.join(base, f"gpuscope-{os.getuid()}")
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            st = os.stat(folder)
            if st.st_uid != os.getuid() or st.st_mode & 0o077:   # someone else's, or open to others
                continue
        except OSError:
            continue
        path = os.path.join(folder, f"run-{pid}.sock")
        if len(path) <= SOCKET_PATH_MAX:
            return path
    raise OSError("no private folder for the run's socket (XDG_RUNTIME_DIR, the temp folder)")


def add_entry(entry: Entry) -> None:
    path = index_dir() / f"{entry.run_id}.json"
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(entry.to_dict(), fh)
    os.replace(tmp, path)


def remove_entry(run_id: str) -> None:
    (index_dir() / f"{run_id}.json").unlink(missing_ok=True)


def active_entries() -> list[Entry]:
    """The runs being hosted now, oldest first; stale entries are removed."""
    out = []
    for path in index_dir().glob("*.json"):
        try:
            entry = Entry.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not alive(entry.pid) or not _answers(entry.socket):   # a reused pid does not answer
            path.unlink(missing_ok=True)
            continue
        out.append(entry)
    return sorted(out, key=lambda e: e.started_ns)


def find_entry(run_id: str) -> Entry | None:
    """The active run with this id or unique id prefix."""
    found = [e for e in active_entries() if e.run_id == run_id or e.run_id.startswith(run_id)]
    exact = [e for e in found if e.run_id == run_id]
    return exact[0] if exact else found[0] if len(found) == 1 else None


def _answers(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        return False
    finally:
        sock.close()
    return True
