"""``gpuscope cleanup``: list suspects (dry run) or clean up the given pids and segments."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from typing import TYPE_CHECKING

from gpuscope.errors import UserError

if TYPE_CHECKING:
    from gpuscope.store.db import Connection

DESCRIPTION = (
    "List processes that hold GPU memory while idle, outlive their gpuscope run, or are orphaned "
    "multiprocessing/torch workers; zombies; stale Nsight Systems agents; leaked /dev/shm "
    "segments and named semaphores (sem.*), with the run that made them; GPU memory of pids that do "
    "not exist (or, in a container, are not visible). Without --kill/--unlink nothing is changed. "
    "With them, targets are re-checked (pid + create time) right before each signal and every "
    "action is logged in the run store."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from gpuscope.cleanup.shm import SHM_MIN_AGE_S

    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--idle-window", type=float, default=5.0, metavar="S",
                   help="seconds to watch GPU holders for idleness (0: skip; default 5)")
    p.add_argument("--shm-min-age", type=float, default=SHM_MIN_AGE_S, metavar="S",
                   help="only judge /dev/shm segments and semaphores unmodified for S seconds "
                        f"(default {SHM_MIN_AGE_S:g})")
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU checks")
    p.add_argument("--kill", action="extend", nargs="+", type=int, default=[], metavar="PID",
                   help="terminate these pids (SIGTERM, then SIGKILL after --grace); for a zombie, signal "
                        "its parent; repeatable: --kill A --kill B kills both")
    p.add_argument("--unlink", action="extend", nargs="+", default=[], metavar="NAME",
                   help="unlink these /dev/shm segments or semaphores (names such as psm_x or sem.mp-x, "
                        "not paths; repeatable)")
    p.add_argument("--force", action="store_true", help="SIGKILL at once instead of SIGTERM first")
    p.add_argument("--grace", type=float, default=3.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL (default 3)")
    p.add_argument("--expect", action="extend", nargs="+", default=[], metavar="PID:CREATE_TIME",
                   help="identities from an earlier listing; a pid whose create time differs is "
                        "refused (the pids are added to --kill); repeatable")
    p.add_argument("--allow-other-users", action="store_true",
                   help="as root, allow acting on other users' processes and segments")
    p.add_argument("--yes", action="store_true", help="really act (without it, only show the plan)")
    p.add_argument("--history", type=int, nargs="?", const=20, default=None, metavar="N",
                   help="show the last N logged cleanup actions and exit")


def _connect() -> Connection:
    from gpuscope.store.db import connect

    try:
        return connect()
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"cannot open the run store: {exc}") from None


def _expectations(items: list[str]):
    from gpuscope.cleanup import ProcIdentity

    out = {}
    for item in items:
        pid, sep, ct = item.partition(":")
        try:
            out[int(pid)] = ProcIdentity(int(pid), float(ct))
        except ValueError:
            raise UserError(f"--expect takes PID:CREATE_TIME pairs, not {item!r}") from None
        if not sep:
            raise UserError(f"--expect takes PID:CREATE_TIME pairs, not {item!r}")
    return out


def _print(args: argparse.Namespace, payload: dict, text: str) -> None:
    if args.json:
        json.dump(payload, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text)


def run(args: argparse.Namespace) -> int:
    if args.idle_window < 0 or args.grace < 0 or args.shm_min_age < 0:
        raise UserError("--idle-window, --grace and --shm-min-age must not be negative")
    conn = _connect()
    if args.history is not None:
        return _history(args, conn)
    if args.kill or args.unlink or args.expect:
        from gpuscope.cleanup.apply import act_on_targets

        return act_on_targets(args, conn, _expectations(args.expect), _print)
    from gpuscope.cleanup import Policy, scan
    from gpuscope.cleanup.render import render_listing

    result = scan(conn=conn, use_gpu=not args.no_gpu, idle_window_s=args.idle_window,
                  shm_min_age_s=args.shm_min_age,
                  policy=Policy(allow_other_users=args.allow_other_users, grace_s=args.grace))
    _print(args, result.to_dict(), render_listing(result))
    return 0


def _history(args: argparse.Namespace, conn: Connection) -> int:
    import time

    from gpuscope.store.cleanup_log import list_actions

    rows = list_actions(conn, args.history)
    lines = [f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r.time_ns / 1e9))}  {r.user}  "
             f"{r.action} {r.target}: {r.result}: {r.message}" for r in rows]
    text = "\n".join(lines) + "\n" if lines else "No cleanup actions logged yet.\n"
    _print(args, {"actions": [r.to_dict() for r in rows]}, text)
    return 0
