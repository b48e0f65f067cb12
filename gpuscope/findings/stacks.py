"""Take the Python stacks of a run's processes: signal the injected hook, read and group the dumps.

The hook (``gpuscope/inject/stacks.py``) registers ``faulthandler`` on ``SIGRTMAX - 2`` in every
process it reaches, writing to ``<run dir>/stacks/<pid>.dump`` (with a ``# thread`` line per started
thread: the names faulthandler does not print). Only such processes are signalled,
and only while the signal is still caught (``SigCgt`` of ``/proc/<pid>/status``): a real-time
signal's default action ends a process, so a process that reset it is never sent one. Processes
the hook did not reach are read from outside with py-spy or pystack when installed; otherwise
their entry says why there is no stack.

Frames are listed most recent call first, as faulthandler, py-spy and pystack print them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from gpuscope.inject.stacks import THREAD_LINE, signal_number   # what the hook writes and signals

STACKS_DIR = "stacks"
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')


class Frame(NamedTuple):
    """One frame of a stack: the function, its file and line."""

    function: str
    file: str
    line: int

    def short(self) -> str:
        return f"{self.function} ({os.path.basename(self.file)}:{self.line})"


@dataclass
class ThreadStack:
    """One thread's stack, most recent frame first."""

    name: str
    frames: list[Frame]
    ident: int = 0
    current: bool = False        # the thread that ran the signal handler (usually the main one)


@dataclass
class ProcessStacks:
    """The stacks of one process's threads, and what read them."""

    pid: int
    role: str
    threads: list[ThreadStack] = field(default_factory=list)
    source: str = "faulthandler"   # faulthandler | py-spy | pystack | none
    note: str = ""                 # why there is no stack, or what read it

    def to_dict(self) -> dict:
        return {"pid": self.pid, "role": self.role, "source": self.source, "note": self.note,
                "threads": [{"name": t.name, "ident": t.ident, "current": t.current,
                             "frames": [f._asdict() for f in t.frames]} for t in self.threads]}

    @classmethod
    def from_dict(cls, p: dict) -> ProcessStacks:
        """The process :meth:`to_dict` made (``latest.json``, a remote agent's ``stacks``)."""
        threads = [ThreadStack(t["name"], [Frame(**f) for f in t.get("frames") or []], t.get("ident", 0),
                               t.get("current", False)) for t in p.get("threads") or []]
        return cls(p["pid"], p.get("role", ""), threads, p.get("source", "faulthandler"), p.get("note", ""))


def parse_dump(text: str, names: dict[int, str] | None = None) -> list[ThreadStack]:
    """faulthandler's text (one dump) as threads; ``names`` maps thread idents to names."""
    names = names or {}
    threads: list[ThreadStack] = []
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            ident = int(m.group(2), 16)
            threads.append(ThreadStack(names.get(ident, f"thread {m.group(2)}"), [], ident,
                                       m.group(1) == "Current thread"))
            continue
        f = _FRAME.match(line)
        if f and threads:
            threads[-1].frames.append(Frame(f.group(3).strip(), f.group(1), int(f.group(2))))
    return threads


def thread_names(path: Path) -> dict[int, str]:
    """``ident -> name`` from the ``# thread <ident> <native_id> <name>`` lines of a ``<pid>.dump``
    file (the last name of an ident wins)."""
    out: dict[int, str] = {}
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        if line.startswith(THREAD_LINE):
            parts = line[len(THREAD_LINE):].split(" ", 2)
            if len(parts) == 3 and parts[0].isdigit():
                out[int(parts[0])] = parts[2]
    return out


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for ``signum`` (bit ``signum - 1`` of SigCgt)."""
    from gpuscope.procs.read import catches as _catches

    return _catches(pid, signum)


def _dumpable(folder: Path, pid: int, signum: int) -> bool:
    """The hook made the process's dump file and its handler is (still) the one for ``signum``."""
    return (folder / f"{pid}.dump").exists() and catches(pid, signum)


def _wait_for_dumps(sizes: dict[int, tuple[Path, int]], timeout_s: float) -> dict[int, str]:
    """The new text of each dump file, once it grew by a dump (not only a started thread's name line)
    and stayed still for 50 ms (or at timeout)."""
    deadline = time.monotonic() + timeout_s
    done: dict[int, str] = {}
    last: dict[int, int] = {}
    while len(done) < len(sizes) and time.monotonic() < deadline:
        time.sleep(0.05)
        for pid, (path, start) in sizes.items():
            if pid in done:
                continue
            size = path.stat().st_size if path.exists() else start
            if size > start and last.get(pid) == size:
                with open(path, "rb") as fh:
                    fh.seek(start)
                    text = fh.read(size - start).decode("utf-8", "replace")
                if "(most recent call first)" in text:   # a dump, not only a started thread's name
                    done[pid] = text
            last[pid] = size
    return done


def dump_processes(run_dir: Path, pids: dict[int, str], timeout_s: float = 3.0) -> list[ProcessStacks]:
    """Stacks of ``pids`` (pid -> role) of the run in ``run_dir``: signalled, or read from outside."""
    folder = Path(run_dir) / STACKS_DIR
    signum = signal_number()
    sizes: dict[int, tuple[Path, int]] = {}
    outside: list[int] = []
    for pid in sorted(pids):
        if not _dumpable(folder, pid, signum):
            outside.append(pid)
            continue
        path = folder / f"{pid}.dump"
        sizes[pid] = (path, path.stat().st_size if path.exists() else 0)
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            del sizes[pid]
    texts = _wait_for_dumps(sizes, timeout_s)
    out = []
    for pid in sorted(sizes):
        if pid in texts:
            out.append(ProcessStacks(pid, pids[pid], parse_dump(texts[pid], thread_names(folder / f"{pid}.dump"))))
        else:
            out.append(ProcessStacks(pid, pids[pid], source="none",
                                     note=f"no dump within {timeout_s:.0f} s (the process may have ended)"))
    out += [read_from_outside(pid, pids[pid]) for pid in outside]
    return sorted(out, key=lambda p: p.pid)


def outside_tool() -> tuple[str, str] | None:
    """(name, path) of py-spy or pystack, whichever is installed first, else None."""
    for name in ("py-spy", "pystack"):
        path = shutil.which(name)
        if path:
            return name, path
    return None


def read_from_outside(pid: int, role: str, *, nonblocking: bool = False, timeout_s: float = 10.0,
                      tool: tuple[str, str] | None = None) -> ProcessStacks:
    """A process gpuscope's hook did not reach (not Python, isolated, or its own handler);
    ``nonblocking``: py-spy reads without pausing the process (a running one's stack may tear);
    ``tool``: (name, path) of the reader, else :func:`outside_tool`'s."""
    tool = tool or outside_tool()
    if tool is None:
        return ProcessStacks(pid, role, source="none",
                             note="not reached by gpuscope's hook, and neither py-spy nor pystack is installed "
                                  "(pip install py-spy) to read it from outside")
    name, path = tool
    argv = ([path, "dump", "--pid", str(pid), "--json", *(["--nonblocking"] if nonblocking else [])]
            if name == "py-spy" else [path, "remote", str(pid)])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ProcessStacks(pid, role, source="none", note=f"{name} failed: {exc}")
    threads = parse_py_spy_json(proc.stdout) if name == "py-spy" else parse_outside(proc.stdout)
    if threads:
        return ProcessStacks(pid, role, threads, source=name, note=f"read by {name}")
    from gpuscope.procs.read import exists

    if not exists(pid):
        return ProcessStacks(pid, role, source="none", note="ended before its stack could be read")
    return ProcessStacks(pid, role, source="none", note=f"{name} could not read it: {_first_line(proc)}")


def _first_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The tool's own message, one line (py-spy adds a Rust backtrace below it)."""
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    first = lines[0] if lines else f"exit status {proc.returncode}"
    return first.removeprefix("Error: ")[:200]


def parse_py_spy_json(text: str) -> list[ThreadStack]:
    """``py-spy dump --json`` as threads (frames most recent first, as py-spy lists them)."""
    import json

    try:
        rows = json.loads(text)
    except ValueError:
        return parse_outside(text)
    threads = []
    for t in rows if isinstance(rows, list) else []:
        frames = [Frame(str(f.get("name", "?")), str(f.get("filename", "?")), int(f.get("line") or 0))
                  for f in t.get("frames") or ()]
        threads.append(ThreadStack(str(t.get("thread_name") or f"thread {t.get('os_thread_id')}"), frames,
                                   int(t.get("os_thread_id") or t.get("thread_id") or 0)))
    return threads


_OUTSIDE_THREAD = re.compile(r'^\s*(?:Thread|Traceback for thread) (0x[0-9a-fA-F]+|\d+)\s*(?:\((.*?)\))?(.*)$')
_OUTSIDE_FRAME = re.compile(r'^\s+(\S.*?) \((.+?):(\d+)\)\s*$')          # py-spy: "    func (file.py:12)"
_PYSTACK_FRAME = re.compile(r'^\s+(?:\(Python\)\s+)?File "(.+?)", line (\d+), in (.+)$')  # pystack 1.x: "(Python) File"
_QUOTED = re.compile(r'"([^"]*)"')


def parse_outside(text: str) -> list[ThreadStack]:
    """py-spy ``dump`` or pystack ``remote`` text as threads (best effort: their formats differ)."""
    threads: list[ThreadStack] = []
    for line in text.splitlines():
        m = _OUTSIDE_THREAD.match(line)
        if m:
            ident = int(m.group(1), 16) if m.group(1).startswith("0x") else int(m.group(1))
            quoted = _QUOTED.search(m.group(3) or "")       # py-spy: Thread 12 (idle): "MainThread"
            name = quoted.group(1) if quoted else (m.group(2) or f"thread {m.group(1)}")
            threads.append(ThreadStack(name.strip(' "'), [], ident))
            continue
        if not threads:
            continue
        f = _OUTSIDE_FRAME.match(line)
        if f:
            threads[-1].frames.append(Frame(f.group(1), f.group(2), int(f.group(3))))
            continue
        p = _PYSTACK_FRAME.match(line)
        if p:
            threads[-1].frames.insert(0, Frame(p.group(3), p.group(1), int(p.group(2))))  # pystack: oldest first
    return threads


# -- grouping ----------------------------------------------------------------------------------------

def _key(thread: ThreadStack) -> tuple:
    return tuple((f.function, f.file, f.line) for f in thread.frames)


def user_frame(thread: ThreadStack, skip: tuple[str, ...] = ("/multiprocessing/", "/gpuscope/inject/",
                                                          "/threading.py", "/concurrent/")) -> Frame | None:
    """The most recent frame outside the standard machinery (the user's code), else the top one."""
    for f in thread.frames:
        if not any(s in f.file for s in skip):
            return f
    return thread.frames[0] if thread.frames else None


@dataclass
class StackGroup:
    """Threads with identical stacks (in processes of one role): shown once, with their count."""

    role: str
    members: list[tuple[ProcessStacks, ThreadStack]]

    @property
    def thread(self) -> ThreadStack:
        return self.members[0][1]

    @property
    def pids(self) -> list[int]:
        return sorted({p.pid for p, _ in self.members})

    @property
    def names(self) -> list[str]:
        return sorted({t.name for _, t in self.members})

    def who(self) -> str:
        """``2 pool workers``, ``1 main``."""
        n = len(self.members)
        return f"{n} {self.role}{'s' if n > 1 else ''}"


def stack_groups(processes: list[ProcessStacks]) -> list[StackGroup]:
    """Identical stacks together (the main process's threads apart by name), largest group first."""
    groups: dict[tuple, list[tuple[ProcessStacks, ThreadStack]]] = {}
    for proc in processes:
        for thread in proc.threads:
            groups.setdefault((proc.role, thread.name if proc.role == "main" else "", _key(thread)),
                              []).append((proc, thread))
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0][0]))
    return [StackGroup(role, members) for (role, _, _), members in ordered]


def group(processes: list[ProcessStacks]) -> list[str]:
    """Identical stacks grouped: ``2 pool worker(s), MainThread: child (hang.py:15) ← mapstar (pool.py:48)``."""
    lines = []
    for g in stack_groups(processes):
        thread = g.thread
        where = " ← ".join(f.short() for f in thread.frames[:3]) or "(no Python frame)"
        user = user_frame(thread)
        at = f" [in {user.short()}]" if user is not None and user not in thread.frames[:3] else ""
        lines.append(f"{g.who()} ({', '.join(g.names[:3])}): {where}{at}")
    for proc in processes:
        if not proc.threads:
            lines.append(f"pid {proc.pid} ({proc.role}): no stack: {proc.note}")
    return lines


# -- the run's processes -----------------------------------------------------------------------------

def roles_of(run_dir: Path, pids: list[int] | None = None) -> dict[int, str]:
    """pid -> role from the event logs (their text lines, through the run's reader; ranges are not
    read); pids with no log are "not injected". With ``pids``, only those."""
    from gpuscope.trace.events import RunEvents

    events = RunEvents(run_dir)
    events.refresh(ranges=False)
    roles = {pid: str(info["role"]) for pid, info in events.headers().items() if info.get("role")}
    if pids is None:
        return roles
    return {p: roles.get(p, "not injected") for p in pids}


def alive_run_pids(run_id: str) -> list[int]:
    """Live processes tagged with the run's id (GPUSCOPE_RUN_ID in their environment)."""
    from gpuscope.procs.membership import tagged_pids

    return tagged_pids(run_id)


def save_latest(run_dir: Path, processes: list[ProcessStacks]) -> Path:
    import json

    path = Path(run_dir) / STACKS_DIR / "latest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"taken_ns": time.time_ns(), "processes": [p.to_dict() for p in processes]}))
    return path


def load_latest(run_dir: Path) -> tuple[int | None, list[ProcessStacks]]:
    """The stacks last taken for the run (when it looked stuck, or by `gpuscope stacks`)."""
    import json

    try:
        data = json.loads((Path(run_dir) / STACKS_DIR / "latest.json").read_text())
    except (OSError, ValueError):
        return None, []
    return data.get("taken_ns"), [ProcessStacks.from_dict(p) for p in data.get("processes", [])]
