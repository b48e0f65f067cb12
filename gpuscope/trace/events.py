"""Read gpuscope's per-process event logs (docs/EVENTS.md): the one parser of the format.

:class:`RunEvents` reads a run's logs incrementally (an offset per file) for the run's whole life;
:func:`read_log` and :func:`read_run_events` read a file or a folder once. What one process's log
holds is a :class:`~gpuscope.trace.process_events.ProcessEvents`.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

from gpuscope.inject.eventlog import (
    CHILD, ERROR, EXIT, HEADER, INFO, JOB, MARK, NAME, RANGE, RANGES_SUFFIX, REIMPORT, SHM, TASK,
)
from gpuscope.rundir import event_logs
from gpuscope.trace.process_events import (  # noqa: F401 - the log's model, named here for readers
    _T0, SMALL_LOG_RANGES, Name, ProcessEvents, RangeRow, _blocks, _style, read_ranges,
)

if TYPE_CHECKING:
    from typing import Callable


def __getattr__(name: str) -> Any:
    """``RANGE_DTYPE`` imports numpy only when someone asks for it."""
    if name == "RANGE_DTYPE":
        from gpuscope.trace.process_events import _dtype

        return _dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _LogState:
    """One process's log as read so far: where each of its two files was read to, and what its
    whole lines said (a line still being written waits for its newline)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.ranges_path = os.path.splitext(path)[0] + RANGES_SUFFIX
        self.offset = 0                 # bytes of the .log read
        self.tail = b""                 # the partial last line of what was read
        self.header: dict[str, Any] | None = None
        self.not_a_log = False          # its first line is no header: not a gpuscope log
        self.info: dict[str, Any] = {}
        self.info_times: list[tuple[int, dict[str, Any]]] = []
        self.names: dict[int, Name] = {}
        self.marks: list[tuple[int, int, int]] = []
        self.errors: list[str] = []
        self.exit: dict[str, Any] | None = None
        self.end_ns: int | None = None
        self.children: list[tuple[int, int, int, str]] = []
        self.jobs: list[tuple[int, int, int]] = []
        self.tasks: list[tuple[int, int, int, int]] = []
        self.main_reimport: tuple[int, int, dict[str, Any]] | None = None
        self.shm: list[tuple[int, dict[str, Any]]] = []
        self.rows: list[RangeRow] = []  # R lines (ranges in text form)
        self.damaged = False
        self.ranges_offset = 0          # bytes of the .ranges file read
        self.ranges_parts: list[bytes] = []   # its whole blocks, as read (joined when asked for)
        self.ranges_size = 0
        self.ranges_pending = b""       # the start of a block not yet whole
        self.blocks: list[tuple[int, int]] = []
        self.ranges_cut = False

    @property
    def pid(self) -> int:
        return int((self.header or {}).get("pid", 0))

    def read(self, ranges: bool = True) -> list[tuple[str, int, Any]]:
        """Read what the files gained; returns the new identity records (kind, t, value): the
        header ("H"), info updates ("I"), children ("C") and the exit record ("X")."""
        new: list[tuple[str, int, Any]] = []
        data = b"" if self.not_a_log else _read_from(self.path, self.offset)
        if data:
            self.offset += len(data)
            data = self.tail + data
            end = data.rfind(b"\n") + 1
            self.tail = data[end:]
            for line in data[:end].split(b"\n")[:-1]:
                self._line(line.decode("utf-8", "replace"), new)
                if self.not_a_log:
                    break
        if ranges and self.header is not None:
            self._read_ranges()
        return new

    def _read_ranges(self) -> None:
        """The whole blocks the .ranges file gained; a block still being written waits."""
        data = _read_from(self.ranges_path, self.ranges_offset)
        if not data:
            return
        self.ranges_offset += len(data)
        pending = self.ranges_pending + data
        blocks, self.ranges_cut = _blocks(pending)
        whole = blocks[-1][0] + 25 * blocks[-1][1] if blocks else 0
        if whole:
            self.ranges_parts.append(pending if whole == len(pending) else pending[:whole])
            self.blocks.extend((self.ranges_size + off, count) for off, count in blocks)
            self.ranges_size += whole
        self.ranges_pending = pending[whole:]

    def _line(self, line: str, new: list[tuple[str, int, Any]]) -> None:
        if self.header is None:
            if not line.startswith(HEADER + "\t"):
                self.not_a_log = True
                return
            try:
                header = json.loads(line[2:])
            except ValueError:
                header = None
            if not _is_header(header):   # a damaged header names no process: not a log to read
                self.not_a_log = True
                return
            self.header, self.info = header, dict(header)
            new.append((HEADER, int(header.get("anchor_mono_ns", 0)), header))
            return
        tag = line[:1]
        parts = line.split("\t")
        try:
            if tag == RANGE:
                self.rows.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), _style(parts[5])))
            elif tag == NAME:
                nid = int(parts[1])
                self.names[nid] = Name(nid, parts[2], parts[3], parts[4], parts[5] if len(parts) > 5 else "")
            elif tag == MARK:
                self.marks.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == INFO:
                update = json.loads(parts[2])
                self.info.update(update)
                self.info_times.append((int(parts[1]), update))
                new.append((INFO, int(parts[1]), update))
            elif tag == CHILD:
                child = (int(parts[1]), int(parts[2]), int(parts[3]), parts[4] if len(parts) > 4 else "")
                self.children.append(child)
                new.append((CHILD, child[0], child))
            elif tag == JOB:
                self.jobs.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif tag == TASK:
                self.tasks.append((int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
            elif tag == REIMPORT:
                self.main_reimport = (int(parts[1]), int(parts[2]), json.loads(parts[3]))
            elif tag == SHM:
                self.shm.append((int(parts[1]), json.loads(parts[2])))
            elif tag == EXIT:
                self.end_ns = int(parts[1])
                self.exit = json.loads(parts[2])
                new.append((EXIT, self.end_ns, self.exit))
            elif tag == ERROR:
                self.errors.append(parts[2] if len(parts) > 2 else line)
        except (IndexError, ValueError):
            self.damaged = True  # a damaged line: keep what came before and after

    def events(self) -> ProcessEvents | None:
        """What was read, as a :class:`ProcessEvents` of its own (the state reads on): None
        without a header. A line or range block not yet whole counts as cut (``truncated``)."""
        if self.header is None:
            return None
        pe = ProcessEvents(path=self.path, header=self.header, info=dict(self.info), names=dict(self.names),
                           marks=list(self.marks), errors=list(self.errors), exit=self.exit, end_ns=self.end_ns,
                           truncated=self.damaged or bool(self.tail) or self.ranges_cut,
                           info_times=list(self.info_times), children=list(self.children), jobs=list(self.jobs),
                           tasks=list(self.tasks), main_reimport=self.main_reimport, shm=list(self.shm))
        if len(self.ranges_parts) > 1:   # joined once; what a later read adds joins it then
            self.ranges_parts = [b"".join(self.ranges_parts)]
        data = self.ranges_parts[0] if self.ranges_parts else b""
        pe._raw = (list(self.rows), data, list(self.blocks))
        return pe


def _is_header(value: Any) -> bool:
    """An H line's object names its process: pid and the two clock anchors, integers."""
    return isinstance(value, dict) and all(isinstance(value.get(k), int) and not isinstance(value.get(k), bool)
                                           for k in HEADER_KEYS)


HEADER_KEYS = ("pid", "anchor_mono_ns", "anchor_wall_ns")


def _read_from(path: str, offset: int) -> bytes:
    """The bytes of ``path`` from ``offset`` on (b"" when it is missing or has no more)."""
    try:
        with open(path, "rb") as fh:
            if offset:
                fh.seek(offset)
            return fh.read()
    except OSError:
        return b""


# (kind, t, value) of one identity record of a run: the header, an info update, a child started,
# the exit record, with the pid of the process that wrote it
Record = tuple[int, str, int, Any]


class RunEvents:
    """A run's event logs, read incrementally: :meth:`refresh` reads only what each file gained
    since the last call (an offset per file; a line or a range block still being written waits).
    One per run, shared by what reads the logs while it runs and at its end (roles, findings,
    Ray, stacks, the process rows); thread-safe.

    :meth:`processes` gives every process's :class:`ProcessEvents` as read so far (one per
    process: an exec'd interpreter's log merged with the one before; roles from parents);
    :meth:`records_since` the identity records (H, I, C, X lines) in the order read, from a cursor,
    so that several readers each go on from where they were; ``on_first_exit`` callbacks run once
    the run's first process (main, or torchrun's agent) has written its exit record."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_folder = os.fspath(run_dir)
        self._logs: dict[str, _LogState] = {}
        self._records: list[Record] = []
        self._lock = threading.Lock()
        self._first_exit_seen = False
        self._on_first_exit: list[Callable[[], None]] = []

    def refresh(self, ranges: bool = True) -> bool:
        """Read what the logs gained (``ranges``: the range files too: the end of a run, not every
        poll of it); True if anything was new."""
        with self._lock:
            grew = False
            for path in event_logs(self.run_folder):
                state = self._logs.get(path)
                if state is None:
                    state = self._logs[path] = _LogState(path)
                before = state.offset + state.ranges_offset
                new = state.read(ranges)
                grew = grew or before != state.offset + state.ranges_offset
                pid = state.pid
                self._records.extend((pid, kind, t, value) for kind, t, value in new)
            fire = self._first_exit_now()
        for callback in fire:
            _call_quietly(callback)
        return grew

    def _first_exit_now(self) -> list[Callable[[], None]]:
        if self._first_exit_seen or not self._first_exited():
            return []
        self._first_exit_seen = True
        return list(self._on_first_exit)

    def _first_exited(self) -> bool:
        state = self._first_state()
        return state is not None and state.exit is not None

    def _first_state(self) -> _LogState | None:
        for role in FIRST_ROLES:
            for state in self._logs.values():
                if state.header is not None and state.header.get("role") == role:
                    return state
        return None

    def on_first_exit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once, on the thread that reads it) when the run's first process has
        written its exit record: its program has ended, though a recorder (nsys) may still write."""
        with self._lock:
            if not self._first_exit_seen:
                self._on_first_exit.append(callback)
                return
        _call_quietly(callback)

    @property
    def first_exited(self) -> bool:
        """Whether the run's first process has written its exit record (as last read)."""
        with self._lock:
            return self._first_exited()

    def processes(self) -> list[ProcessEvents]:
        """Every process's log as read so far, ordered by start time (one per process)."""
        with self._lock:
            logs = [pe for state in self._logs.values() if (pe := state.events()) is not None]
        logs.sort(key=lambda p: (p.start_ns, p.pid))
        return roles_from_parents(merge_execs(logs))

    def records_since(self, cursor: int = 0) -> tuple[int, list[Record]]:
        """(the next cursor, the identity records read since ``cursor``): (pid, kind, t, value)
        with kind "H" (value: the header), "I" (the update), "C" ((t_call, t_return, pid, role))
        or "X" (the exit record)."""
        with self._lock:
            return len(self._records), self._records[cursor:]

    def headers(self) -> dict[int, dict[str, Any]]:
        """Per pid, its identity as last read (the header updated by its info lines)."""
        with self._lock:
            return {state.pid: dict(state.info) for state in self._logs.values() if state.header is not None}

    @property
    def bytes_read(self) -> int:
        """How much of the logs has been read (grows with the program's events)."""
        with self._lock:
            return sum(s.offset + s.ranges_offset for s in self._logs.values())


def _call_quietly(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # noqa: BLE001 - a listener's bug must not stop the reading
        pass


# The run's first process: what ``gpuscope run`` started (python), or torchrun's agent.
FIRST_ROLES = ("main", "torchrun agent")


def read_log(path: str | os.PathLike[str]) -> ProcessEvents | None:
    """Parse one log; None when it has no header (not a gpuscope log)."""
    state = _LogState(os.fspath(path))
    state.read()
    return state.events()


def read_run_events(run_dir: str | os.PathLike[str]) -> list[ProcessEvents]:
    """Every process log of a run, ordered by start time (:meth:`RunEvents.processes` of a
    reader that reads the folder once)."""
    events = RunEvents(run_dir)
    events.refresh()
    return events.processes()


# What a multiprocessing child is until it reads its Process object (hook.detect_role).
START_ROLES = ("spawn child", "fork child")


def roles_from_parents(logs: list[ProcessEvents]) -> list[ProcessEvents]:
    """A child that never learnt its role (a pool worker that ``Pool.terminate()`` ended while it
    started, before it read its Process object) gets the one the C line of the process that
    started it gives (that process is not its parent for a forkserver child: matched by pid, the
    last ``start()`` call before the child's own start)."""
    told: dict[int, list[tuple[int, str]]] = {}
    for pe in logs:
        for t_call, _, pid, role in pe.children:
            if role:
                told.setdefault(pid, []).append((t_call, role))
    for pe in logs:
        if pe.role in START_ROLES and pe.pid in told:
            before = [(t, role) for t, role in told[pe.pid] if t <= pe.start_ns]
            if before:
                pe.info["role"] = max(before)[1]
    return logs


def merge_execs(logs: list[ProcessEvents]) -> list[ProcessEvents]:
    """One entry per process: a process that ``exec``s a new Python interpreter writes a second log
    under the same pid (a fork child of ``subprocess.Popen(preexec_fn=...)``, which runs Python's
    fork handlers before the exec, or ``os.execv``). The earlier log (no exit record, same parent)
    becomes the later one's ``pre_exec``; its ranges and marks join the later one's.
    ``logs`` are in start order."""
    latest: dict[int, ProcessEvents] = {}
    out: list[ProcessEvents] = []
    for pe in logs:
        prev = latest.get(pe.pid)
        if (prev is not None and prev.exit is None and not pe.header.get("forked")
                and prev.ppid == pe.ppid and prev.start_ns <= pe.start_ns):
            _absorb(pe, prev)
            out.remove(prev)
        latest[pe.pid] = pe
        out.append(pe)
    return out


def _absorb(pe: ProcessEvents, prev: ProcessEvents) -> None:
    pe.pre_exec = prev
    pe.truncated = pe.truncated or prev.truncated
    pe.errors = prev.errors + pe.errors
    if not prev.range_count and not prev.marks:
        return
    shift = max(pe.names, default=0) + 1   # the earlier log's name ids, moved past the later one's
    for nid, name in prev.names.items():
        pe.names[nid + shift] = name._replace(id=nid + shift)
    if prev.range_count and prev._small() and pe._small():
        moved = [(t0, t1, tid, nid + shift, style) for t0, t1, tid, nid, style in prev.range_rows()]
        pe._rows, pe._raw = sorted(moved + pe.range_rows(), key=_T0), None
    elif prev.range_count:
        import numpy as np

        moved = prev.ranges.copy()
        moved["nid"] += shift
        both = np.concatenate([moved, pe.ranges]) if len(pe.ranges) else moved
        pe.ranges = both[np.argsort(both["t0"], kind="stable")]
    pe.marks = sorted([(t, tid, nid + shift) for t, tid, nid in prev.marks] + pe.marks)


def main_exited(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run's first process has written its exit record, read from the folder once (a
    caller that asks again and again holds a :class:`RunEvents` and its ``on_first_exit``)."""
    events = RunEvents(run_dir)
    events.refresh(ranges=False)
    return events.first_exited
