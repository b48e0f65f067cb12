"""One node of a torchrun job across nodes: measure this node's clock, then copy the run into the job folder.

With ``--job-dir DIR`` (docs/MULTINODE.md) every node runs its own ``gpuscope run``. This recorder

* on node rank 0 serves its wall clock (``gpuscope.runs.clocksync.ClockServer``) while the program
  runs and says where in ``DIR/clock-<job id>.json``; on every other node measures its offset to it,
  on a thread, once the program runs (it costs the program nothing);
* reads one (wall, monotonic) anchor of the node, which maps its event-log times to its wall clock;
* when the run ends, copies the run folder (event logs, output, spec, nsys report) to
  ``DIR/node<K>-<host>-<run id>/`` and writes ``node.json`` there last: the job id, host, node rank,
  the anchor, the clock measure and the process rows. ``gpuscope report DIR`` merges those folders.

The copy happens after the program: the node's recording writes to its local run folder, never
to the shared file system while the program runs.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import json
from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext

if TYPE_CHECKING:
    from gpuscope.runs.clocksync import ClockMeasure, ClockServer

NODE_FILE = "node.json"
NODE_FORMAT = 1
MEASURE_WAIT_S = 120.0
END_WAIT_S = 15.0      # node 0 waits at most this long after its own run for the others' end exchanges


def clock_file(job_dir: Path, job_id: str) -> Path:
    return job_dir / f"clock-{job_id}.json"


def node_folder_name(node_rank: int, host: str, run_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in host) or "host"
    return f"node{node_rank}-{safe}-{run_id}"


class NodeJobRecorder(BaseRecorder):
    name = "node job"

    def __init__(self) -> None:
        self.host = socket.gethostname()
        self._launch: Launch | None = None
        self._server: ClockServer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.measure: ClockMeasure | None = None
        self.measure_end: ClockMeasure | None = None
        self.anchor: tuple[int, int] | None = None

    def prepare(self, launch: Launch) -> None:
        self._launch = launch

    def started(self, ctx: RunContext) -> None:
        from gpuscope.runs import clocksync

        spec = ctx.spec
        self.anchor = clocksync.anchor()
        path = clock_file(Path(spec.job_dir or "."), spec.rdzv_id or "gpuscope")
        if spec.node_rank == 0:
            server = self._server = clocksync.ClockServer()
            server.publish(path, self.host)
            self.measure = clocksync.ClockMeasure(0, 0, 0, "self")
            return
        fallback = clocksync_host(spec.rdzv_endpoint)

        def work() -> None:
            self.measure = clocksync.measure_published(path, fallback, MEASURE_WAIT_S, self._stop)

        self._thread = threading.Thread(target=work, name="gpuscope-clock-measure", daemon=True)
        self._thread.start()

    def program_ended(self, ctx: RunContext) -> None:
        # the exchange belongs to the program's lifetime: a program that ended before node 0's
        # clock server showed up (a failed start) does not keep gpuscope waiting for it
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        start = self.measure
        if start is not None and start.error is None and start.reference != "self":
            # again at the end: the two offsets give the clocks' drift (node 0 serves until its run is finished)
            from gpuscope.runs import clocksync

            host, _, port = start.reference.rpartition(":")
            try:
                self.measure_end = clocksync.measure(host, int(port), timeout_s=2.0, end=True)
            except (OSError, ValueError) as exc:
                self.measure_end = clocksync.ClockMeasure(0, None, 0, start.reference, error=str(exc))

    def finish(self, outcome: Outcome) -> None:
        launch = self._launch
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._thread is not None and self.measure is None:
            from gpuscope.runs.clocksync import ClockMeasure

            self.measure = ClockMeasure(0, None, 0, "", error="the program ended before node 0's clock answered")
        if self._server is not None and launch is not None:
            # the other nodes measure again when their programs end: serve until they have
            self._server.wait_for_ends(END_WAIT_S)
            self._server.close()
            path = clock_file(Path(launch.spec.job_dir or "."), launch.spec.rdzv_id or "gpuscope")
            try:
                if json.loads(path.read_text()).get("pid") == os.getpid():
                    path.unlink()
            except (OSError, ValueError):
                pass
        if launch is None or not outcome.launched or not launch.spec.job_dir:
            return
        spec = launch.spec
        target = Path(spec.job_dir or ".") / node_folder_name(spec.node_rank, self.host, launch.run_id)
        try:
            copy_run(launch.run_dir, target)
            measure = self.measure
            record = {
                "format": NODE_FORMAT, "job_id": spec.rdzv_id, "node_rank": spec.node_rank, "nnodes": spec.nnodes,
                "nproc": spec.nproc, "host": self.host, "run_id": launch.run_id, "run_dir": str(launch.run_dir),
                "rdzv_endpoint": spec.rdzv_endpoint, "exit_code": outcome.exit.code, "signal": outcome.exit.signal,
                "anchor": {"wall_ns": self.anchor[0], "mono_ns": self.anchor[1]} if self.anchor else None,
                "clock": measure.to_dict() if measure is not None else None,
                "clock_end": self.measure_end.to_dict() if self.measure_end is not None else None,
                "processes": [row.to_dict() for row in outcome.processes],
            }
            tmp = target / f".{NODE_FILE}.tmp"
            tmp.write_text(json.dumps(record, indent=1))
            tmp.replace(target / NODE_FILE)
        except OSError as exc:
            outcome.notes.append(f"node {spec.node_rank}: could not copy the run into {target}: {exc}")
            return
        outcome.notes.append(f"node {spec.node_rank} of {spec.nnodes} ({self.host}): run copied to {target}; "
                             + clock_note(measure, self.measure_end))


def clock_note(measure: ClockMeasure | None, end: ClockMeasure | None = None) -> str:
    if measure is None:
        return "clock offset not measured"
    if measure.error:
        return f"clock offset not measured ({measure.error}): wall clocks taken as they are"
    if measure.reference == "self":
        return "the job's reference clock"
    note = (f"clock offset {measure.offset_ns / 1e6:+.3f} ms ± {(measure.residual_ns or 0) / 1e6:.3f} ms "
            f"to node 0 ({measure.reference})")
    if end is not None and end.error is None:
        note += f", {(end.offset_ns - measure.offset_ns) / 1e3:+.1f} µs by the end"
    return note


def clocksync_host(endpoint: str | None) -> str | None:
    if not endpoint:
        return None
    from gpuscope.spec import split_endpoint

    return split_endpoint(endpoint)[0]


def copy_run(run_dir: Path, target: Path) -> None:
    """The run's event logs, output, spec and nsys report (not nsys's intermediate .qdstrm)."""
    target.mkdir(parents=True, exist_ok=True)
    if (run_dir / "events").is_dir():
        shutil.copytree(run_dir / "events", target / "events", dirs_exist_ok=True)
    for entry in run_dir.iterdir():
        if entry.is_file() and entry.suffix != ".qdstrm":
            shutil.copy2(entry, target / entry.name)
