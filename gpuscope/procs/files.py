"""The raw ``/proc`` reads: one file's bytes, the list of pids, descriptors kept open per file.

``os`` only: ``gpuscope run`` lists the host's processes (:mod:`gpuscope.procs.existing`) before
it starts the program, when little else is imported. Every path under ``/proc`` that gpuscope
reads is built here or in the other modules of :mod:`gpuscope.procs`.
"""

from __future__ import annotations

import os

PROC = "/proc"
O_RDONLY = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)   # every /proc read: close-on-exec

__all__ = ["O_RDONLY", "PROC", "ProcFile", "StatReader", "forks_since_boot", "host_file", "list_pids",
           "own_fds", "pid_max", "pid_path", "read_bytes"]


def pid_path(pid: int | str, *parts: str) -> str:
    """``/proc/<pid>/<parts...>`` (``pid`` may be ``"self"``)."""
    return "/".join((PROC, str(pid), *parts))


def host_file(name: str) -> str:
    """``/proc/<name>`` for a host-wide file (``stat``, ``meminfo``, ``loadavg``, ``sys/...``)."""
    return f"{PROC}/{name}"


def list_pids() -> set[str]:
    """Names of the numeric entries of /proc (kept as strings: diffing them is cheap)."""
    try:
        return {d for d in os.listdir(PROC) if d.isdigit()}
    except OSError:
        return set()


def read_bytes(path: str, size: int = 4096) -> bytes | None:
    """The whole content of a /proc file, or None when it cannot be read (gone, not permitted)."""
    try:
        fd = os.open(path, O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            if len(chunk) < size and size <= 4096:
                break
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def own_fds() -> list[int]:
    """This process's open descriptors (the listing's own descriptor may be among them)."""
    try:
        return [int(name) for name in os.listdir(pid_path("self", "fd"))]
    except OSError:
        return []


def forks_since_boot() -> int | None:
    """How many processes and threads the host created since it booted (``/proc/stat``'s
    ``processes``), or None where it cannot be read."""
    data = read_bytes(host_file("stat"), 65536) or b""
    at = data.find(b"\nprocesses ")
    if at < 0:
        return None
    try:
        return int(data[at + 11:data.index(b"\n", at + 11)])
    except ValueError:
        return None


def pid_max() -> int:
    """The kernel's ``pid_max`` (32768 where it cannot be read: the smallest usual value)."""
    try:
        return int((read_bytes(host_file("sys/kernel/pid_max"), 64) or b"").strip() or 32768)
    except ValueError:
        return 32768


class ProcFile:
    """One ``/proc`` file read each tick through a descriptor kept open (``pread`` at offset 0
    regenerates it): no open/close per read. Reopened once if a read fails."""

    def __init__(self, path: str, size: int = 65536) -> None:
        self.path, self.size = path, size
        self._fd = -1

    @classmethod
    def host(cls, name: str, size: int = 65536) -> ProcFile:
        """A host-wide file: ``ProcFile.host("meminfo")``."""
        return cls(host_file(name), size)

    def read(self) -> bytes | None:
        for _attempt in (0, 1):
            if self._fd < 0:
                try:
                    self._fd = os.open(self.path, O_RDONLY)
                except OSError:
                    return None
            try:
                data = os.pread(self._fd, self.size, 0)
            except OSError:
                data = b""
            if data:
                return data
            self.close()
        return None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class StatReader:
    """Reads ``/proc/<pid>/stat`` through a descriptor kept open per process (``pread`` at 0
    regenerates the file), saving the open/close of each tick. The descriptor names the process
    it was opened for, so a reused pid cannot be read by mistake. At most ``max_fds`` are kept."""

    def __init__(self, max_fds: int = 256) -> None:
        self._fds: dict[int, int] = {}
        self.max_fds = max_fds

    def read_raw(self, pid: int) -> bytes | None:
        """The stat text, or None if the process is gone."""
        fd = self._fds.get(pid)
        if fd is None:
            if len(self._fds) >= self.max_fds:
                return read_bytes(pid_path(pid, "stat"), 1024)
            try:
                fd = self._fds[pid] = os.open(pid_path(pid, "stat"), O_RDONLY)
            except OSError:
                return None
        try:
            data = os.pread(fd, 1024, 0)
        except OSError:
            data = b""
        if not data:
            self.forget(pid)
            return None
        return data

    def forget(self, pid: int) -> None:
        fd = self._fds.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for pid in list(self._fds):
            self.forget(pid)


def last_pid(loadavg: ProcFile) -> int | None:
    """The last process id the kernel handed out (the 5th field of ``/proc/loadavg``): while it
    stays the same, no process was created, so ``/proc`` need not be listed again."""
    data = loadavg.read()
    try:
        return int(data.split()[4]) if data else None
    except (IndexError, ValueError):
        return None
