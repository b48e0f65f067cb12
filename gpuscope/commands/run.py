"""``gpuscope run``: run a script in a managed, annotated process tree."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any, Callable

from gpuscope.errors import UserError
from gpuscope.runs import early as early_start
from gpuscope.runs.pipes import widen_pipe
from gpuscope.runs.slurm import node_options
from gpuscope.spec import NsysOptions, RunSpec, TorchProfileOptions
from gpuscope.spec_checks import LAUNCHERS, NSYS_TIMEOUT_S, NSYS_TRACE, START_METHODS, parse_ints

DESCRIPTION = (
    "Run SCRIPT under gpuscope: its own session, the chosen multiprocessing start method, NVTX "
    "ranges recorded in every Python process, and a per-process summary at the end. The script's "
    "stdout and exit code are unchanged; gpuscope's own lines go to stderr."
)


def add_nsys_options(g: Any, what: str, after: str) -> None:
    """The --nsys options of ``gpuscope run`` and ``gpuscope compare --start-methods`` (one set)."""
    g.add_argument("--nsys", action="store_true", help=f"record {what} under nsys profile")
    g.add_argument("--nsys-trace", default=",".join(NSYS_TRACE), help="nsys --trace list")
    g.add_argument("--nsys-arg", action="append", default=[], help="extra argument for nsys profile; repeatable")
    g.add_argument("--nsys-fork", choices=("auto", "on", "off"), default="auto",
                   help="--trace-fork-before-exec (auto: on for fork runs)")
    g.add_argument("--nsys-timeout", type=float, default=NSYS_TIMEOUT_S,
                   help=f"limit in seconds for nsys after {after} ended: finishing the recording, "
                        "importing and exporting it together")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start-method", default="default", choices=START_METHODS,
                   help="multiprocessing start method for every Pool/Process/Executor the script creates "
                        "without choosing one itself (default: leave it alone)")
    p.add_argument("--launcher", default="python", choices=LAUNCHERS)
    p.add_argument("--nproc", type=int, default=1, help="torchrun: processes per node")
    p.add_argument("--python", help="interpreter to run the script with (default: this one)")
    p.add_argument("--cwd", help="working directory")
    p.add_argument("--forkserver-preload", default="", metavar="MODULE[,MODULE...]",
                   help="modules the forkserver imports once for all its children (as "
                        "multiprocessing.set_forkserver_preload; the program's own call wins)")
    p.add_argument("--annotate", action="append", default=[], metavar="MODULE:QUALNAME",
                   help="add a range around matching functions (globs allowed); repeatable")
    p.add_argument("--interval", type=float, default=0.1, help="telemetry sampling interval in s (0.02-1)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON on the last line of stdout "
                   "(a line of its own, also after output that did not end its last line)")
    p.add_argument("--output-cap-mb", type=float, default=None, metavar="MB",
                   help="keep at most MB of each saved output stream (its first and last halves; 0: keep "
                        "all; default: $GPUSCOPE_OUTPUT_CAP_MB or 64); what you see live is never cut")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="print nothing of gpuscope's own on stderr (no notes, no table), except errors")
    add_nsys_options(p.add_argument_group("Nsight Systems"), "the run", "the program")
    add_torch_profile_options(p.add_argument_group("PyTorch profiler (docs/TORCH-PROFILER.md)"))
    n = p.add_argument_group("torchrun across nodes (docs/MULTINODE.md; under srun, SLURM_* fill absent flags)")
    n.add_argument("--nnodes", type=int, default=None, help="number of nodes of the job")
    n.add_argument("--node-rank", type=int, default=None, help="this node's rank (0 .. nnodes-1)")
    n.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT", help="torchrun's c10d rendezvous")
    n.add_argument("--rdzv-id", default=None, metavar="ID", help="the job id every node shares")
    n.add_argument("--rdzv-timeout", type=int, default=None, metavar="S",
                   help="how long a node waits for the others to join (torchrun's join_timeout; default 600)")
    n.add_argument("--job-dir", default=None, metavar="DIR",
                   help="shared folder each node copies its run into (merge them: gpuscope report DIR)")
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS]",
                   help="run a module as `python -m MODULE`; every argument after MODULE is the module's")
    p.add_argument("script", nargs="?", help="the Python script to run (or use -m MODULE)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script or module")


def add_torch_profile_options(g: Any) -> None:
    """The --torch-profile options: torch.profiler in the run's torch processes, without edits."""
    g.add_argument("--torch-profile", action="store_true",
                   help="run torch.profiler in every torch process of the run (a trace per process in the run)")
    g.add_argument("--torch-profile-ranks", default="all", metavar="all|R,R",
                   help="profile only these ranks (default: all torch processes)")
    g.add_argument("--torch-profile-schedule", default=None, metavar="WAIT,WARMUP,ACTIVE[,REPEAT]",
                   help="profile these steps, a step being one optimizer.step() (default: the whole process)")
    g.add_argument("--torch-profile-shapes", action="store_true", help="record operators' input shapes")
    g.add_argument("--torch-profile-memory", action="store_true", help="record tensor memory")
    g.add_argument("--torch-profile-stack", action="store_true", help="record Python stacks (large traces)")


def torch_profile_options(args: argparse.Namespace) -> TorchProfileOptions:
    """The --torch-profile options as given (checked by RunSpec.validated)."""
    ranks = (getattr(args, "torch_profile_ranks", None) or "all").strip()
    steps = getattr(args, "torch_profile_schedule", None)
    return TorchProfileOptions(enabled=bool(getattr(args, "torch_profile", False)),
                               ranks=None if ranks == "all" else parse_ints(ranks, "--torch-profile-ranks"),
                               schedule=parse_ints(steps, "--torch-profile-schedule") if steps else None,
                               shapes=bool(getattr(args, "torch_profile_shapes", False)),
                               memory=bool(getattr(args, "torch_profile_memory", False)),
                               stack=bool(getattr(args, "torch_profile_stack", False)))


def output_cap(args: argparse.Namespace) -> int | None:
    """``--output-cap-mb`` in bytes (None: the default cap)."""
    return None if args.output_cap_mb is None else int(max(args.output_cap_mb, 0) * 1024 * 1024)


class stop_on_signals:   # noqa: N801 - used as a function: `with stop_on_signals(...):`
    """Ctrl-C or SIGTERM while the ``with`` block runs calls ``stop`` (the first time after saying
    ``message``; a second press calls it again, which kills at once); the previous handlers come
    back after. ``held``: the presses held while the program started early are handled first, as if
    pressed now."""

    def __init__(self, stop: Callable[[], None], say: Callable[[str], None], message: str,
                 held: _HeldSignals | None = None) -> None:
        self._stop, self._say, self._message, self._held = stop, say, message, held
        self._presses = 0
        self._old: tuple[Any, Any] = (None, None)

    def _on_signal(self, _signum: int, _frame: Any) -> None:
        self._presses += 1
        if self._presses == 1:
            self._say(self._message)
        self._stop()

    def __enter__(self) -> None:
        self._old = (signal.signal(signal.SIGINT, self._on_signal),
                     signal.signal(signal.SIGTERM, self._on_signal))
        if self._held is not None:   # its handlers were the ones just replaced: what comes back is what it replaced
            self._old = self._held.originals()
            for _ in range(self._held.count):
                self._on_signal(signal.SIGINT, None)

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._old[0])
        signal.signal(signal.SIGTERM, self._old[1])


class _HeldSignals:
    """Ctrl-C and SIGTERM counted, not raised, while the program started early runs and the run is
    set up; then ``stop_on_signals(held=...)`` handles them (or :meth:`release` puts the previous
    handlers back)."""

    def __init__(self) -> None:
        self.count = 0
        self._old: tuple[Any, Any] | None = (signal.signal(signal.SIGINT, self._press),
                                             signal.signal(signal.SIGTERM, self._press))

    def _press(self, _signum: int, _frame: Any) -> None:
        self.count += 1

    def originals(self) -> tuple[Any, Any]:
        """The handlers this replaced (it is no longer in charge of putting them back)."""
        assert self._old is not None
        old, self._old = self._old, None
        return old

    def release(self) -> int:
        """The previous handlers back (if still in charge); how many presses came."""
        if self._old is not None:
            old_int, old_term = self.originals()
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)
        return self.count


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    fork = {"auto": None, "on": True, "off": False}[args.nsys_fork]
    nsys = NsysOptions(enabled=args.nsys, trace=tuple(t for t in args.nsys_trace.split(",") if t),
                       extra_args=tuple(args.nsys_arg), trace_fork=fork, timeout_s=args.nsys_timeout)
    script, module, rest = args.script or "", None, list(args.args)
    if args.module is not None:
        if script or not args.module:
            raise UserError("give either a script or -m MODULE (with the module's arguments after it)")
        module, rest = args.module[0], args.module[1:]
    return RunSpec(script=script, module=module, args=tuple(rest), cwd=args.cwd, python=args.python,
                   start_method=args.start_method, launcher=args.launcher, nproc=args.nproc,
                   annotate=tuple(args.annotate), nsys=nsys, sample_interval_s=args.interval,
                   forkserver_preload=tuple(m.strip() for m in getattr(args, "forkserver_preload", "").split(",")
                                            if m.strip()),
                   torch_profile=torch_profile_options(args), **_node_options(args))


def _node_options(args: argparse.Namespace) -> dict[str, Any]:
    """The multi-node flags given, the absent ones from SLURM_* when --job-dir asks for a job across nodes."""
    given = {"nnodes": getattr(args, "nnodes", None), "node_rank": getattr(args, "node_rank", None),
             "rdzv_endpoint": getattr(args, "rdzv_endpoint", None), "rdzv_id": getattr(args, "rdzv_id", None),
             "rdzv_timeout_s": getattr(args, "rdzv_timeout", None), "job_dir": getattr(args, "job_dir", None)}
    if given["job_dir"] and args.launcher == "torchrun":
        for key, value in node_options(os.environ).items():
            if given.get(key) is None:
                given[key] = value
    return {k: v for k, v in given.items() if v is not None}


class _Relay:
    """Relays the program's bytes to our own stdout / stderr unbuffered (one syscall per chunk), and
    writes gpuscope's notes so that each starts a line of its own: it remembers whether each stream
    ended in the middle of a line (and, when both go to one terminal or file, which wrote last), and
    holds a note back until the program ends its line (a pytest progress line stays whole), at most
    ``HOLD_S``, after which it goes on a new line."""

    HOLD_S = 10.0

    def __init__(self) -> None:
        self._lock = threading.RLock()   # a note from a signal handler may come while the main thread writes one
        self._mid = {1: False, 2: False}
        self._shared = _same_destination(1, 2)
        self._last = 1
        self._held: list[str] = []
        self._timer: threading.Timer | None = None

    @property
    def stdout_mid_line(self) -> bool:
        """Whether the program's stdout ended in the middle of a line (``--json``'s line starts its own)."""
        return self._mid[1]

    def __call__(self, stream_name: str, chunk: bytes) -> None:
        fd = 1 if stream_name == "stdout" else 2
        with self._lock:
            _write(fd, chunk)
            if chunk:
                self._mid[fd] = not chunk.endswith(b"\n")
                self._last = fd
            if self._held and not self._mid_line():
                self._write_held(False)

    def note(self, text: str, hold: bool = True) -> None:
        """Write one note (lines) on stderr, on a line of its own."""
        with self._lock:
            self._held.append(text)
            if hold and self._mid_line():
                if self._timer is None:
                    self._timer = threading.Timer(self.HOLD_S, self.release)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._write_held(self._mid_line())

    def release(self) -> None:
        """Write the held notes now, on a new line if the program is mid-line."""
        with self._lock:
            if self._held:
                self._write_held(self._mid_line())

    def _mid_line(self) -> bool:
        return self._mid[self._last] if self._shared else self._mid[2]

    def _write_held(self, newline: bool) -> None:
        text = ("\n" if newline else "") + "".join(f"{t}\n" for t in self._held)
        self._held.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        _write(2, text.encode("utf-8", "replace"))
        self._mid[2] = False
        if self._shared:
            self._mid[1] = False


def _told(told: set[tuple[str, tuple[int, ...]]], finding: Any) -> bool:
    """Whether the finding was shown while the run ran (one that grew to more processes since too)."""
    from gpuscope.findings.recorder import GROWING

    key = (finding.code, finding.pids)
    return key in told or (finding.code in GROWING and any(
        code == finding.code and set(pids) <= set(finding.pids) for code, pids in told))


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:  # a closed or broken pipe: the program's output is still saved in the run folder
        pass


def _same_destination(a: int, b: int) -> bool:
    """Whether two descriptors write to one file, pipe or terminal (one stream of lines to a reader)."""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def run(args: argparse.Namespace) -> int:
    relay = _Relay()
    told: set[tuple[str, tuple[int, ...]]] = set()    # findings shown while it ran: not again at the end

    def progress(message: str) -> None:
        if not args.quiet:
            relay.note(f"gpuscope: {message}")

    def live_finding(finding: Any) -> None:
        if not args.quiet:   # --quiet: held back until the end
            told.add((finding.code, finding.pids))
            relay.note(f"gpuscope: finding: {finding.line()}\n    fix: {finding.fix}")

    early, held = None, None
    spec = spec_from_args(args)
    if early_start.eligible(spec):   # the program starts now; gpuscope's imports follow while it runs
        held = _HeldSignals()
        early = early_start.start(spec, live=_is_terminal(1))
        if early is None and held.release():
            raise KeyboardInterrupt   # pressed before anything started: as without the early start
    try:
        # imported once the program runs (the early start): their loading overlaps its start
        from gpuscope.findings.recorder import FindingsRecorder
        from gpuscope.runs.supervisor import Run
        from gpuscope.status import RunStatus

        findings = FindingsRecorder(on_finding=live_finding)
        widen_pipe(1)   # our stdout, when it is a pipe: 1 MiB, so each chunk relayed goes on in one write
        run_ = Run(spec, output=[relay], progress=progress, stdin=None,
                   live_output=_is_terminal(1), output_cap_bytes=output_cap(args), recorders=[findings],
                   early=early)
    except BaseException:
        if early is not None:
            early.abandon()
        if held is not None:
            held.release()
        raise
    if getattr(args, "ends_process", False):   # the gpuscope program: os._exit follows the run (cli.py)
        from gpuscope.store import db

        db.hold_until_exit()
    with stop_on_signals(run_.stop, progress, "stopping the run (Ctrl-C again to kill it at once)",
                         held if early is not None else None):
        run_.start()
        for note in run_.notes:
            progress(note)
        shown = len(run_.notes)
        result = run_.wait()
    relay.release()
    if not args.quiet:
        from gpuscope.runs.table import format_table

        relay.note(format_table(result), hold=False)
        for note in result.notes[shown:]:      # what the recorders found at the end (--annotate, nsys)
            relay.note(f"gpuscope: {note}", hold=False)
    for finding in result.findings:
        if not _told(told, finding):
            relay.note(f"gpuscope: {finding.line()}\n    fix: {finding.fix}", hold=False)
    if args.json:
        import json   # the end's: the program's start does not wait for it

        sys.stdout.write(("\n" if relay.stdout_mid_line else "") + json.dumps(result.to_json()) + "\n")
        sys.stdout.flush()
    if result.status is RunStatus.STOPPED:
        return 130
    if result.exit.signal:
        return 128 + signal.Signals[result.exit.signal].value
    return result.exit.code or (1 if result.error else 0)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
