"""The hook's only ``/proc`` access: this process's own status and names (``/proc/self``).

The injected hook cannot import ``gpuscope.procs`` (it is loaded by path into other
interpreters, standard library only), so its few reads and writes of ``/proc/self`` live here,
in one module (tests/procs/test_one_reader.py allows this one exception). Nothing here raises.
"""

import os

_SELF = "/proc/self"


def status_kib(field):
    """A ``kB`` field of ``/proc/self/status`` (``b"VmHWM"``), or None. Read with ``os.read``:
    a buffered file object and its lines cost several times more at exit."""
    try:
        fd = os.open(_SELF + "/status", os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            while True:   # to the end (one read of ~1.5 KB, in practice)
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(fd)
        prefix = field + b":"
        for line in b"".join(chunks).split(b"\n"):
            if line.startswith(prefix):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def start_ticks():
    """This process's start in clock ticks after boot (field 22 of its stat): with the pid, the
    identity others see it by (gpuscope.procs.key.ProcKey); None where it cannot be read."""
    try:
        fd = os.open(_SELF + "/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 1024)
        finally:
            os.close(fd)
        # the name (field 2) may hold spaces and parentheses: count from its closing one
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def write_comm(name, tid=None):
    """Set the kernel's name of this process (``tid`` None) or of one of its threads; True
    when it was written."""
    path = _SELF + "/comm" if tid is None else "%s/task/%d/comm" % (_SELF, tid)
    try:
        with open(path, "w") as fh:
            fh.write(name[:15])
        return True
    except (OSError, TypeError):
        return False


def thread_states(name):
    """This process's threads called ``name``: thread id -> state letter (R, S, D...)."""
    states = {}
    want = name.encode()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/stat" % tid, "rb") as fh:
                stat = fh.read()
        except OSError:
            continue   # the thread ended
        end = stat.rfind(b")")
        if stat[stat.find(b"(") + 1:end] == want:
            states[tid] = stat[end + 2:end + 3].decode()
    return states

