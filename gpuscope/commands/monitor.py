"""``gpuscope monitor``: live GPU, process and host telemetry, as text (like ``nvidia-smi dmon``
and ``pmon``) or one JSON object per line.

Without ``--pid``/``--run`` it shows GPUs, the host's GPU processes and host totals. ``--pid``
follows a process tree (descendants, including ones that left the session). ``--run`` follows
the samples a running run's sampler writes into the store (about a second behind), or replays
a finished run's. Works without a GPU: one note says why GPU values are missing.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import time
from typing import Any

from gpuscope.errors import UserError

HEADER_EVERY = 20   # ticks between repeated text headers, as dmon does


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="seconds between samples, 0.02-1 (default 1)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--pid", type=int, help="follow this process and its descendants")
    who.add_argument("--run", metavar="ID", help="follow a run's stored samples (id or unique prefix)")
    p.add_argument("--uss", action="store_true", help="also read USS per process (costly; with --pid)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


class _Printer:
    """Writes ticks and notes to stdout in the chosen form."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.ticks = 0

    def note(self, text: str) -> None:
        if self.as_json:
            print(json.dumps({"type": "note", "note": text}), flush=True)
        else:
            print(f"# note: {text}", file=sys.stderr, flush=True)

    def tick(self, tick: dict[str, Any]) -> None:
        from gpuscope.telemetry import dmon

        if self.as_json:
            print(json.dumps(tick), flush=True)
        else:
            lines = dmon.text_lines(tick)
            if self.ticks % HEADER_EVERY == 0:
                lines = dmon.header_lines(tick) + lines
            print("\n".join(lines), flush=True)
        self.ticks += 1


def run(args: argparse.Namespace) -> int:
    from gpuscope.telemetry.sampler import check_timing

    try:
        check_timing(args.interval, args.duration)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    printer = _Printer(args.json)
    try:
        if args.run:
            return _follow_store(args, printer)
        return _sample_live(args, printer)
    except KeyboardInterrupt:
        return 0


def _sample_live(args: argparse.Namespace, printer: _Printer) -> int:
    from gpuscope.telemetry import dmon
    from gpuscope.telemetry.sampler import RunSampler, Sampler

    if args.pid is not None:
        try:
            sampler: Sampler = RunSampler(args.pid, args.interval, uss_interval_s=1.0 if args.uss else None)
        except ProcessLookupError:
            raise UserError(f"no process {args.pid}") from None
    else:
        sampler = Sampler(args.interval)
    ticks: queue.Queue = queue.Queue()
    sampler.add_listener(ticks.put)
    end = None if args.duration is None else time.monotonic() + args.duration
    missed = 0
    sampler.start()
    try:
        while end is None or time.monotonic() < end:
            try:
                batch = ticks.get(timeout=0.05)
            except queue.Empty:
                continue
            for note in batch.notes:
                printer.note(note)
            tick = dmon.batch_dict(batch)
            # grid points the sampler skipped since the last tick, because a tick overran (or the
            # machine did not run it in time): a late sample is never doubled up to catch up
            tick["missed"], missed = sampler.missed - missed, sampler.missed
            printer.tick(tick)
    finally:
        sampler.stop(final_sample=False)
    return 0


def _follow_store(args: argparse.Namespace, printer: _Printer) -> int:
    from gpuscope.store import db, runs, samples

    conn = db.connect()
    row = runs.get_run(conn, args.run)
    if row is None:
        raise UserError(f"no run {args.run!r} in the store (see `gpuscope history`)")
    end = None if args.duration is None else time.monotonic() + args.duration
    since, told = -1, set()
    while True:
        info = samples.series_info(conn, row.id)
        running = not (runs.get_run(conn, row.id) or row).status.final
        if info is None and not running:
            raise UserError(f"run {row.id} has no telemetry samples in the store")
        ticks = _stored_ticks(conn, info, since) if info is not None else []
        for note in (info or {}).get("notes", []):
            if note not in told:
                told.add(note)
                printer.note(note)
        for tick in ticks:
            printer.tick(tick)
            since = tick["t_ns"]
        if not ticks and (not running or _root_gone(info)):
            return 0    # finished, or its sampler's process tree is gone (a crashed app)
        if end is not None and time.monotonic() >= end:
            return 0
        if running:
            time.sleep(min(args.interval, 0.5))


def _root_gone(info: dict[str, Any] | None) -> bool:
    from gpuscope.procs.read import read

    return bool(info and info.get("root_pid")) and read(int(info["root_pid"])) is None  # type: ignore[index]


def _stored_ticks(conn: Any, info: dict[str, Any], since: int) -> list[dict[str, Any]]:
    """Ticks (shaped like ``dmon.batch_dict``) from stored rows after ``since``."""
    from array import array

    from gpuscope.store import samples

    key, names = info["key"], None
    ticks: dict[int, dict[str, Any]] = {}

    def tick(t: int) -> dict[str, Any]:
        wall = (info["anchor_wall_ns"] + t - info["anchor_mono_ns"]) / 1e9
        return ticks.setdefault(t, {"type": "sample", "t": wall, "t_ns": t, "host": None, "gpus": [],
                                    "processes": [], "gpu_processes": []})

    for r in samples.read_rows(conn, key, "host", since):
        cores = tuple(array("f", r[-1])) if r[-1] else ()
        tick(r[0])["host"] = {**dict(zip(samples.HOST_COLS, r[1:-1])), "cores": [round(c, 1) for c in cores]}
    for r in samples.read_rows(conn, key, "gpu", since):
        tick(r[1])["gpus"].append({"index": r[0], **dict(zip(samples.GPU_COLS, r[2:]))})
    proc_rows = samples.read_rows(conn, key, "proc", since)
    if proc_rows:
        names = {pid: d.get("name") for pid, d in samples.read_processes(conn, key).items()}
    for r in proc_rows:
        tick(r[1])["processes"].append({"pid": r[0], "name": (names or {}).get(r[0]),
                                        **dict(zip(samples.PROC_COLS, r[2:]))})
    return [ticks[t] for t in sorted(ticks)]
