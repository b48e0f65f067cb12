"""Rules on the program's output: the exact messages CPython, multiprocessing and torchrun print.

:class:`OutputScanner` takes stderr in chunks as they arrive (live) or a whole file (after the
run); it keeps counts and the first excerpt of each message, and :meth:`findings` turns them into
findings. Messages (CPython 3.8-3.14, PyTorch 2.x):

- missing main guard: "An attempt has been made to start a new process before the current
  process has finished its bootstrapping phase." (``multiprocessing/spawn.py``);
- leaked shared memory: "resource_tracker: There appear to be N leaked shared_memory objects to
  clean up at shutdown: {...}";
- a killed executor worker: "A process in the process pool was terminated abruptly";
- torchrun's failure block: "exitcode  : -9 (pid: 1234)";
- CUDA after fork: "Cannot re-initialize CUDA in forked subprocess".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuscope.finding import Finding, Severity, evidence, now_ns
from gpuscope.findings.registry import Input, Phase, RunInputs, declare

BOOTSTRAP = "has finished its bootstrapping phase"
# Patterns as text, compiled by `re` (and cached there) once a line has the message's words: most
# runs' stderr never does.
_LEAKED = (r"There appear to be (\d+) leaked (shared_memory|semaphore|folder) objects? to clean up at "
           r"shutdown(?::\s*(.*))?")
_ABRUPT = "terminated abruptly while the future was running or pending"
_TORCHRUN_EXIT = r"exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)"
_CUDA_FORK = "Cannot re-initialize CUDA in forked subprocess"
_FILE_LINE = r'^\s*File "(.+?)", line (\d+)'
MAX_LINE = 8192


@dataclass
class _Hit:
    """How often one stderr pattern was seen, when first, and its first lines."""

    count: int = 0
    first_ns: int | None = None
    excerpt: list[str] = field(default_factory=list)


class OutputScanner:
    """Counts known messages in stderr, chunk by chunk (lines may span chunks)."""

    def __init__(self) -> None:
        self._partial = b""
        self._recent: list[str] = []           # the last lines, for the traceback before a message
        self.hits: dict[str, _Hit] = {}
        self.leaked: dict[str, set[str]] = {}  # kind -> names
        self.torchrun_exits: dict[int, int] = {}
        self.lines = 0

    def feed(self, chunk: bytes) -> None:
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > MAX_LINE:
            lines.append(self._partial[:MAX_LINE])
            self._partial = b""
        for raw in lines:
            self._line(raw[:MAX_LINE].decode("utf-8", "replace"))

    def finish(self) -> None:
        if self._partial:
            self._line(self._partial[:MAX_LINE].decode("utf-8", "replace"))
            self._partial = b""

    def _hit(self, code: str, excerpt: list[str]) -> None:
        hit = self.hits.setdefault(code, _Hit())
        hit.count += 1
        if hit.first_ns is None:

            hit.first_ns = now_ns()
            lines = [line.rstrip() for line in excerpt if line.strip()]
            where = _user_frame_lines(lines)
            hit.excerpt = where + [line for line in lines[-6:] if line not in where]

    def _line(self, line: str) -> None:
        self.lines += 1
        self._recent.append(line)
        if len(self._recent) > 80:            # a spawn child's traceback is ~40 lines long
            del self._recent[:-60]
        if BOOTSTRAP in line:
            self._hit("missing-main-guard", self._recent)
        elif _ABRUPT in line or "A process in the process pool was terminated abruptly" in line:
            self._hit("executor-worker-killed", [line])
        elif _CUDA_FORK in line:
            self._hit("cuda-after-fork", self._recent[-3:])
        elif "leaked" in line and (m := _re().search(_LEAKED, line)):
            self._hit("leaked-" + m.group(2), [line])
            self.leaked.setdefault(m.group(2), set()).update(_names(m.group(3)))
        elif "exitcode" in line and (m := _re().search(_TORCHRUN_EXIT, line)):
            self.torchrun_exits[int(m.group(2))] = int(m.group(1))

    def findings(self) -> list[Finding]:
        out = []
        for code, hit in self.hits.items():
            maker = _MAKERS.get(code)
            if maker is not None:
                out.append(maker(self, hit))
        return out


def _names(text: str | None) -> set[str]:
    """The names in the tracker's set repr ``{'/psm_1', '/psm_2'}``."""
    if not text:
        return set()
    import ast  # only when a leak message came

    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return set(_re().findall(r"'([^']+)'", text))
    return {str(v) for v in value} if isinstance(value, (set, list, tuple)) else set()


_MACHINERY = ("/multiprocessing/", "<frozen", "<string>", "/gpuscope/inject/", "/runpy.py", "/concurrent/")


def _user_frame_lines(lines: list[str]) -> list[str]:
    """The traceback's first frame in the user's code, with its source line (or [])."""
    for i, line in enumerate(lines):
        m = _re().match(_FILE_LINE, line)
        if m and not any(s in m.group(1) for s in _MACHINERY):
            return lines[i:i + 2]
    return []


def script_location(excerpt: list[str]) -> str | None:
    """The first ``File "...", line N`` of a traceback excerpt that is not the standard library."""
    for line in excerpt:
        m = _re().match(_FILE_LINE, line)
        if m and not any(s in m.group(1) for s in _MACHINERY):
            return f"{m.group(1)}:{m.group(2)}"
    return None


def _main_guard(scanner: OutputScanner, hit: _Hit) -> Finding:
    from gpuscope.fix import StopRun   # loaded with the finding that offers it, not with every run's rules

    where = script_location(hit.excerpt)
    return Finding(
        "missing-main-guard",
        f"child processes failed to start {hit.count} time(s): the script starts processes at import time, "
        f"without `if __name__ == \"__main__\":`, and spawn/forkserver children re-import it"
        + (f" ({where})" if where else ""),
        "put the code that creates the pool or processes under `if __name__ == \"__main__\":` (a pool keeps "
        "restarting failed workers: the run will not finish by itself; stop it)",
        Severity.ERROR, (), evidence({"failed starts": hit.count}, hit.excerpt), StopRun(), hit.first_ns)


def _leaked(kind: str):
    def make(scanner: OutputScanner, hit: _Hit) -> Finding:
        from gpuscope.fix import CleanupShm   # loaded with the finding that offers it, not with every run's rules

        names = sorted(scanner.leaked.get(kind, ()))
        return Finding(
            "leaked-shm" if kind == "shared_memory" else f"leaked-{kind}",
            f"{len(names) or hit.count} {kind} object(s) were never unlinked by the program; Python's resource "
            f"tracker removed them at shutdown" + (f": {', '.join(names[:5])}" if names else ""),
            "call close() in every process that attached, and unlink() once in the creator, e.g. in a "
            "try/finally around the work (SharedMemory, or SharedMemoryManager which does both)",
            Severity.WARNING, (), evidence({"objects": len(names) or hit.count}, hit.excerpt),
            CleanupShm(tuple(names)) if kind == "shared_memory" and names else None, hit.first_ns)
    return make


def _abrupt(scanner: OutputScanner, hit: _Hit) -> Finding:
    return Finding(
        "died-by-signal", "a ProcessPoolExecutor worker was terminated abruptly (killed by a signal, or it "
        "crashed); the executor is broken and its pending futures failed",
        "look for the worker's signal (SIGKILL: the OOM killer; SIGSEGV: a native extension) and reduce "
        "memory per worker or fix the crash", Severity.ERROR, (), evidence({"messages": hit.count}, hit.excerpt),
        None, hit.first_ns)


def _cuda_fork(scanner: OutputScanner, hit: _Hit) -> Finding:
    from gpuscope.fix import SetStartMethod   # loaded with the finding that offers it, not with every run's rules

    return Finding(
        "cuda-after-fork", "a fork child tried to use CUDA initialised in its parent (\"Cannot re-initialize "
        "CUDA in forked subprocess\")", "use the spawn start method (or forkserver)", Severity.ERROR, (),
        evidence({"messages": hit.count}, hit.excerpt), SetStartMethod("spawn"), hit.first_ns)


_MAKERS = {"missing-main-guard": _main_guard, "leaked-shared_memory": _leaked("shared_memory"),
           "leaked-semaphore": _leaked("semaphore"), "executor-worker-killed": _abrupt,
           "cuda-after-fork": _cuda_fork}


def _re():
    import re

    return re


# -- the rules' declarations ----------------------------------------------------------------------

def _output_of(codes: tuple[str, ...], hit: str | None = None):
    """A check that passes on the scanner's findings of these codes (of ``hit``'s pattern only)."""
    def check(run: RunInputs) -> list[Finding]:
        if hit is not None and (run.scanner is None or hit not in run.scanner.hits):
            return []
        return [f for f in run.output if f.code in codes]
    return check


_BOTH = {Phase.LIVE, Phase.AFTER}
declare("missing-main-guard", inputs=Input.OUTPUT, phase=_BOTH, check=_output_of(("missing-main-guard",)),
        title="a spawn/forkserver child re-ran the script's pool creation: no `if __name__ == \"__main__\":`")
declare("leaked-shm", inputs=Input.OUTPUT, phase=_BOTH, check=_output_of(("leaked-shm",)),
        title="the resource tracker unlinked shared_memory segments the program never unlinked")
declare("leaked-semaphore", inputs=Input.OUTPUT, phase=_BOTH, check=_output_of(("leaked-semaphore",)),
        title="the resource tracker removed named semaphores the program leaked")
declare("executor-worker-killed", codes=("died-by-signal",), inputs=Input.OUTPUT, phase=_BOTH,
        check=_output_of(("died-by-signal",), "executor-worker-killed"),
        title="a ProcessPoolExecutor worker was terminated abruptly (its futures failed)")
declare("cuda-fork-message", codes=("cuda-after-fork",), inputs=Input.OUTPUT, phase=_BOTH,
        check=_output_of(("cuda-after-fork",)),
        title="\"Cannot re-initialize CUDA in forked subprocess\" in stderr")
