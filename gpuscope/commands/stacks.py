"""``gpuscope stacks RUN_ID|PID|--latest``: the Python stack of every thread of every process of a run."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = (
    "Ask every live process of a run for the stacks of all its threads (gpuscope's hook dumps them on "
    "a real-time signal, SIGRTMAX-2, even when the process is stuck in C holding the GIL) and print them "
    "grouped: identical stacks once, with their count. Processes the hook did not reach are read with "
    "py-spy or pystack when installed. For a run that has ended, the stacks taken when it looked stuck."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", metavar="RUN_ID|PID", help="run id (or unique prefix), or a pid of the run")
    p.add_argument("--latest", action="store_true", help="the most recent run")
    p.add_argument("--json", action="store_true",
                   help="print {run_id, taken_ns, live, processes: [{pid, role, threads: [{name, frames: "
                        "[{function, file, line}]}]}]} (frames most recent call first)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds to wait for the dumps (default 5; a loaded machine may need more)")


def _text(run_id: str, live: bool, procs: list) -> str:
    from gpuscope.findings.stacks import group

    head = f"run {run_id}: {len(procs)} process(es)" + ("" if live else " (the run has ended: stacks taken when it "
                                                                         "looked stuck)")
    lines = [head, *group(procs), ""]
    for p in procs:
        lines.append(f"pid {p.pid} ({p.role})" + (f": {p.note}" if p.note else ""))
        for t in p.threads:
            lines.append(f"  thread {t.name}")
            lines += [f"    {f.function} ({f.file}:{f.line})" for f in t.frames]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import time

    from gpuscope.errors import UserError
    from gpuscope.findings import stacks
    from gpuscope.findings.runref import resolve

    try:
        run_id, run_dir = resolve(args.target, args.latest)
    except UserError:
        if not (args.target or "").isdigit() or args.latest:
            raise
        return _any_tree(int(args.target), args.json)     # a job gpuscope did not start (gpuscope.attach)
    pids = stacks.alive_run_pids(run_id)
    live = bool(pids)
    if live:
        procs = stacks.dump_processes(run_dir, stacks.roles_of(run_dir, pids), timeout_s=args.timeout)
        stacks.save_latest(run_dir, procs)
        taken: int | None = time.time_ns()
    else:
        taken, procs = stacks.load_latest(run_dir)
        if not procs:
            raise UserError(f"run {run_id} has no live process and no stacks were taken while it ran")
    if args.json:
        sys.stdout.write(json.dumps({"run_id": run_id, "taken_ns": taken, "live": live,
                                     "processes": [p.to_dict() for p in procs]}) + "\n")
    else:
        print(_text(run_id, live, procs))
    return 0


def _any_tree(pid: int, as_json: bool) -> int:
    """The stacks of the Python process tree rooted at ``pid``, read from outside (py-spy)."""
    from gpuscope.attach.stacks import stacks_of_tree

    got = stacks_of_tree(pid)
    if as_json:
        sys.stdout.write(json.dumps({"run_id": None, "root_pid": pid, "live": True, **got.to_dict()}) + "\n")
        return 0
    print(_text(f"(not a gpuscope run) of pid {pid}", True, got.processes))
    for r in got.refused:
        print(f"cannot read {r.line()}")
    return 0
