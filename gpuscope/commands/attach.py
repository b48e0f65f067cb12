"""``gpuscope attach PID``: follow a Python process tree gpuscope did not start, without injection."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import TYPE_CHECKING

from gpuscope.errors import UserError

if TYPE_CHECKING:
    from gpuscope.attach.session import AttachSession
    from gpuscope.attach.view import AttachView

DESCRIPTION = (
    "Adopt the process tree rooted at PID and follow it (new workers, ended ones) until it ends, "
    "--duration passes, or Ctrl-C (which only detaches: the job is sent nothing). Shows each process's "
    "role (read from its command line, environment and stack), CPU, memory and GPU memory, the findings "
    "that need no injection, and with --stacks the Python stacks of every thread (py-spy, without "
    "pausing the processes). The session is kept as a run (kind \"attached\"): gpuscope report and "
    "gpuscope findings read it."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pid", type=int, metavar="PID", help="the root of the tree (a torchrun, a pool's parent, ...)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="detach after S seconds")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="seconds between samples and, with --json, between printed objects (0.02-1; default 1)")
    p.add_argument("--stacks", action="store_true", help="read every process's Python stacks (at the start "
                                                         "and the end, and while the job looks idle)")
    p.add_argument("--profile", type=float, default=None, metavar="S",
                   help="sample the whole tree's CPU for S seconds (py-spy); top functions per role, and a "
                        "speedscope file in the run's folder")
    p.add_argument("--stuck-after", type=float, default=None, metavar="S",
                   help="seconds without CPU (and unchanged stacks) after which the job looks stuck "
                        "(default 10, or half of --duration when shorter)")
    p.add_argument("--no-record", action="store_true", help="do not keep the session in History")
    p.add_argument("--json", action="store_true", help="print one JSON object per interval and at the end")


def _stuck_after(args: argparse.Namespace) -> float:
    if args.stuck_after is not None:
        return max(0.5, args.stuck_after)
    return 10.0 if args.duration is None else max(1.0, min(10.0, args.duration / 2))


def run(args: argparse.Namespace) -> int:
    from gpuscope.attach.session import AttachSession
    from gpuscope.telemetry.sampler import check_timing

    try:
        check_timing(args.interval, args.duration)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if args.profile is not None and args.profile <= 0:
        raise UserError("--profile must be more than 0 seconds")
    session = AttachSession(args.pid, args.interval, record=not args.no_record, stuck_after_s=_stuck_after(args))
    try:
        session.start()
    except KeyboardInterrupt:
        session.detach()              # Ctrl-C while attaching: the session is recorded as far as it got
        return 130
    profiler = _start_profile(session, args.profile)
    try:
        _follow(session, args)
    except KeyboardInterrupt:
        pass
    finally:
        if args.stacks and not session.ended:
            session.take_stacks()
        if profiler is not None:
            profiler.join()
        view = session.detach()
    _print(view, args.json, final=True)
    return 0


def _start_profile(session: AttachSession, seconds: float | None) -> threading.Thread | None:
    if seconds is None:
        return None
    t = threading.Thread(target=session.profile, args=(seconds,), name="gpuscope-attach-profile", daemon=True)
    t.start()
    return t


def _follow(session: AttachSession, args: argparse.Namespace) -> None:
    """Until the tree ends or the duration passes: print (--json), read stacks while it idles."""
    end = None if args.duration is None else time.monotonic() + args.duration
    if args.stacks:
        session.take_stacks()
    last_stacks = time.monotonic()
    every = session.watch.stuck_after_s / 2
    while not session.ended and (end is None or time.monotonic() < end):
        session.wait_ended(min(args.interval, max(0.0, end - time.monotonic())) if end is not None
                           else args.interval)
        if session.ended:
            break
        if session.idle_s() >= every and time.monotonic() - last_stacks >= every:
            session.take_stacks()            # two reads while idle decide whether it looks stuck
            last_stacks = time.monotonic()
        if args.json:
            _print(session.view(), True, final=False)


def _print(view: AttachView, as_json: bool, final: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps({**view.to_json(), "final": final}) + "\n")
        sys.stdout.flush()
        return
    print(text(view))


def text(view: AttachView) -> str:
    """The view for a terminal: the tree, the findings, the stacks grouped, what could not be read."""
    from gpuscope.findings.stacks import group

    state = "ended" if view.ended else "still running (detached)"
    lines = [f"attached run {view.run_id or '(not recorded)'}: tree of pid {view.root_pid}, "
             f"{len(view.processes)} process(es), {state}"]
    for p in view.processes:
        gpu = f" gpu {p.gpu_mem_bytes / 2**20:.0f} MiB" if p.gpu_mem_bytes else ""
        lines.append(f"  {p.pid:>7} {p.role:<22} cpu {p.cpu_s:7.2f} s  rss {p.rss_bytes / 2**20:7.1f} MiB"
                     f"{gpu}  {p.state:<9} {' '.join(p.cmdline)[:80]}")
    lines += [f.line() for f in view.findings]
    if view.stacks is not None:
        lines += ["stacks:", *(f"  {g}" for g in group(view.stacks.processes))]
    lines += [f"cannot read {r.line()}" for r in view.refused]
    if view.profile is not None:
        prof = view.profile
        lines.append(f"profile: {prof.samples} samples in {prof.seconds:.0f} s, {prof.path}" +
                     (f" ({prof.note})" if prof.note else ""))
        for role, top in prof.top.items():
            lines += [f"  {role}: {t.function} ({t.file}:{t.line}) {t.share:.0%}" for t in top[:5]]
    lines += [f"note: {n}" for n in view.notes]
    return "\n".join(lines)
