"""The per-process event log (format: docs/EVENTS.md) and the process's identity.

Hot path: a closed range is one tuple appended to ``STATE.buf``; formatting and the write happen
in :meth:`State.flush`, at most every ``FLUSH_NS`` (checked against the range's own end time, so
no extra clock read), at the end of each pool task, and at exit. A SIGKILL loses at most the last
``FLUSH_NS`` of events and leaves a readable prefix (whole lines only are written per ``os.write``
of a complete buffer; a reader drops a final partial line).
"""

import os
import sys
import time
from _thread import allocate_lock, get_ident as _get_ident, get_native_id as _get_native_id

from . import exitstatus
from .procself import start_ticks

# Start-up cost (docs/INJECTION.md): this module is loaded in every process, so it imports no
# threading (_thread is built in), no json (_dumps below) and no array until ranges are written.

now = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: one clock for all processes of the host
FLUSH_NS = 100_000_000
FORMAT_VERSION = 1
RANGES_MAGIC = b"GSR1"
# The format's names (docs/EVENTS.md); the one reader is gpuscope.trace.events.
EVENTS_DIR = "events"           # in the run folder: <pid>-<anchor_mono_ns>.log / .ranges
LOG_SUFFIX = ".log"
RANGES_SUFFIX = ".ranges"
RANGE_COLUMNS = (("t0", "q", 8), ("t1", "q", 8), ("tid", "i", 4), ("nid", "i", 4), ("style", "c", 1))
# The line kinds: header, name, range (text form), mark, info, child, job, task, exit, error.
HEADER, NAME, RANGE, MARK, INFO, CHILD, JOB, TASK, EXIT, ERROR = "HSRMICJTXE"
REIMPORT = "U"   # __main__ re-imported by a spawn child or the forkserver (inject/reimport.py)
SHM = "D"        # a /dev/shm segment or named semaphore created or unlinked (inject/shmwatch.py)

_tids: dict = {}


def native_tid():
    """The OS thread id, cached per thread (get_native_id is a system call)."""
    tid = _tids.get(_get_ident())
    if tid is None:
        tid = _tids[_get_ident()] = _get_native_id()
    return tid


def forget_thread_ids():
    """After fork the surviving thread has a new OS id."""
    _tids.clear()


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


def open_append(path):
    """A descriptor appending to the run-folder file ``path``. Only the run's first process finds
    its folder missing and makes it: the others skip a ``mkdir`` (a system call each, even for a
    folder that is there). Private from the start (0600, folders 0700), as the run's end makes every file
    of the run folder: that walk then has nothing to change for them (a ``chmod`` each)."""
    try:
        return os.open(path, _APPEND, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
        return os.open(path, _APPEND, 0o600)


def _clean(text):
    return str(text).replace("\t", " ").replace("\n", " ")


class State:
    """Everything the injection knows about this process. Reset in fork children."""

    def __init__(self):
        self.run_dir = os.environ.get("GPUSCOPE_RUN_DIR", "")
        self.pid = 0
        self.fd = -1
        self.rfd = -1
        self.ranges_path = ""   # the .ranges file, created with the process's first ranges
        self.buf = []
        self.next_flush = 0
        self.names = {}
        self.stacks = {}
        self.open_se = {}
        self.info = {}
        self.lock = allocate_lock()
        self.exited = False
        self.at_exit = []   # callables run just before the exit record (lazy counters write their last line)

    # -- lifecycle ------------------------------------------------------------------------------
    def open(self, header):
        """Start this process's log with its header line."""
        self.pid = os.getpid()
        self.buf = []
        self.names = {}
        self.stacks = {}
        self.open_se = {}
        self.exited = False
        mono, wall = now(), time.time_ns()   # side by side: the two clocks' anchors agree closely
        header = dict(header)
        header.update(v=FORMAT_VERSION, pid=self.pid, ppid=os.getppid(),
                      anchor_mono_ns=mono, anchor_wall_ns=wall, start_ticks=start_ticks())
        self.info = dict(header)
        stem = os.path.join(self.run_dir, EVENTS_DIR, "%d-%d" % (self.pid, mono))
        self.fd = open_append(stem + LOG_SUFFIX)
        self.rfd = -1
        self.ranges_path = stem + RANGES_SUFFIX   # most processes write no range: no file for them
        self._write("H\t%s\n" % _dumps(header, default=str))
        self.next_flush = mono + FLUSH_NS

    def forget_parent(self):
        """In a fork child: drop the parent's file and buffered events (the parent writes them)."""
        for fd in (self.fd, self.rfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd = self.rfd = -1
        self.ranges_path = ""
        self.buf = []
        forget_thread_ids()
        self.lock = allocate_lock()

    # -- writing --------------------------------------------------------------------------------
    def _write(self, text, fd=None):
        fd = self.fd if fd is None else fd
        if fd < 0:
            return
        data = text.encode("utf-8", "replace") if isinstance(text, str) else text
        while data:
            n = os.write(fd, data)
            data = data[n:]

    def flush(self):
        buf = self.buf
        n = len(buf)
        self.next_flush = now() + FLUSH_NS
        if not n or self.fd < 0 or self.pid != os.getpid():
            return
        items = buf[:n]
        del buf[:n]
        texts = [item for item in items if item.__class__ is str]
        ranges = [item for item in items if item.__class__ is not str]
        try:
            if texts:  # names (S lines) reach the disk before the ranges that use them
                self._write("".join(texts))
            if ranges:
                if self.rfd < 0 and self.ranges_path:
                    self._open_ranges()
                self._write(pack_ranges(ranges), self.rfd)
        except OSError:
            self.fd = self.rfd = -1
            self.ranges_path = ""

    def _open_ranges(self):
        """Create the .ranges file (no lock: a thread that flushes at the same moment may open it
        too, and the later one closes its own descriptor again)."""
        fd = open_append(self.ranges_path)
        if self.rfd < 0:
            self.rfd = fd
        else:
            os.close(fd)

    def name_id(self, kind, domain, message, color):
        """The integer id of a name; declares it (an S line) on first use."""
        key = (kind, domain, message, color)
        nid = self.names.get(key)
        if nid is not None:
            return nid
        with self.lock:
            nid = self.names.get(key)
            if nid is not None:
                return nid
            nid = len(self.names)
            self.buf.append("S\t%d\t%s\t%s\t%s\t%s\n" % (
                nid, kind, _clean(domain or ""), _clean(message if message is not None else ""),
                color_text(color)))
            self.names[key] = nid
        return nid

    def add_range(self, t0, t1, nid, style="P"):
        self.buf.append((t0, t1, native_tid(), nid, style))
        if t1 > self.next_flush:
            self.flush()

    def mark(self, nid):
        t = now()
        self.buf.append("M\t%d\t%d\t%d\n" % (t, native_tid(), nid))
        if t > self.next_flush:
            self.flush()

    def update(self, **info):
        """Record a change of identity/state (role, name, ...): an I line, written at once."""
        self.info.update(info)
        self.buf.append("I\t%d\t%s\n" % (now(), _dumps(info, default=str)))
        self.flush()

    def child_started(self, t_call, t_return, pid, role):
        """A multiprocessing child started by this process: a C line, on disk within FLUSH_NS."""
        self.buf.append("C\t%d\t%d\t%d\t%s\n" % (t_call, t_return, pid, role))
        if t_return > self.next_flush:
            self.flush()

    def main_reimport(self, t0, t1, info):
        """``__main__`` re-imported by a spawn child or the forkserver (inject/reimport.py): a U line,
        written at once (one per process, before its first task)."""
        self.buf.append("%s\t%d\t%d\t%s\n" % (REIMPORT, t0, t1, _dumps(info)))
        self.flush()

    def shm(self, info):
        """A shared-memory segment or named semaphore created or unlinked (inject/shmwatch.py): a D
        line, written at once (a process killed later still leaves it)."""
        self.buf.append("%s\t%d\t%s\n" % (SHM, now(), _dumps(info, default=str)))
        self.flush()

    def emit(self, info):
        """For periodic reporters (torch memory): an I line, on disk within FLUSH_NS."""
        t = now()
        self.buf.append("I\t%d\t%s\n" % (t, _dumps(info, default=str)))
        if t > self.next_flush:
            self.flush()

    def error(self, where, exc):
        """An error inside the injection: logged, never raised."""
        msg = "%s: %s: %s" % (where, type(exc).__name__, exc)
        try:
            self.buf.append("E\t%d\t%s\n" % (now(), _clean(msg)))
            self.flush()
            with open(os.path.join(self.run_dir, "inject-errors.log"), "a") as fh:
                fh.write("pid %d: %s\n" % (os.getpid(), msg))
        except Exception:
            pass

    def exit(self, exit_code=None, how=None):
        """The exit record: status, how the process ended, and its own CPU time and peak memory."""
        if self.exited or self.pid != os.getpid():
            return
        self.exited = True
        for hook in list(self.at_exit):
            try:
                hook()
            except Exception:
                pass
        open_ranges = sum(len(v) for v in self.stacks.values()) + len(self.open_se)
        record = {"exit_code": exit_code, "open_ranges": open_ranges}
        if how is not None:
            record["how"] = how
        try:
            record.update(exitstatus.usage())
        except Exception:
            pass
        self.buf.append("X\t%d\t%s\n" % (now(), _dumps(record)))
        self.flush()


def pack_ranges(ranges):
    """One block of the .ranges file: magic, count, then the columns (docs/EVENTS.md)."""
    from array import array  # first use only: a process without ranges never loads it

    t0, t1, tid, nid, style = zip(*ranges)
    return b"".join((
        RANGES_MAGIC, array("I", (len(ranges),)).tobytes(),
        array("q", t0).tobytes(), array("q", t1).tobytes(),
        array("i", tid).tobytes(), array("i", nid).tobytes(),
        "".join(style).encode("ascii"),
    ))


def color_text(color):
    if color is None or color == "":
        return ""
    if isinstance(color, int):
        return "#%06x" % (color & 0xFFFFFF)
    try:
        from nvtx.colors import _NVTX_COLORS  # the names nvtx itself accepts

        value = _NVTX_COLORS.get(color)
        if value is not None:
            return "#%06x" % value
    except Exception:
        pass
    return _clean(color)


STATE = State()


def safe(where):
    """Decorator for injection entry points: log any exception, never raise it."""
    def deco(fn):
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                STATE.error(where, exc)
                return None
        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        return wrapper
    return deco


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _json_str(text):
    """A JSON string literal, escaped as ``json.dumps`` does (ASCII only)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"%s"' % text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x10000:
            out.append("\\u%04x" % code)
        else:
            code -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 | (code >> 10), 0xDC00 | (code & 0x3FF)))
    return '"%s"' % "".join(out)


def _json_key(key):
    if isinstance(key, str):
        return _json_str(key)
    if key is True or key is False or key is None or isinstance(key, (int, float)):
        return _json_str(_dumps(key))
    return _json_str(str(key))


def _dumps(value, default=str):
    """``json.dumps(value, default=default)`` without importing json in every process's start
    (the hook stays lean: docs/INJECTION.md). It is also not the ``json.dumps`` that ``--annotate
    json.dumps`` wraps, so gpuscope's own log lines never count as the program's calls of it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _json_str(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (_json_key(k), _dumps(v, default)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_dumps(v, default) for v in value)
    if default is None:
        raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)
    return _dumps(default(value), None)


def python_version():
    return "%d.%d.%d" % sys.version_info[:3]
