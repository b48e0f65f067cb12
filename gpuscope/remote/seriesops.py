"""The agent's start-method series (``compare_series``): the same script under each start
method, run alternated in the agent's own process; its runs go to this host's store and its
live stream goes back as events of the call (docs/REMOTE.md)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.remote import protocol

if TYPE_CHECKING:
    from gpuscope.remote.call import Call
    from gpuscope.views.run_stream import RunStream

PUMP_S = 0.05          # how often the stream's buffers go out as events
KILL_AFTER_S = 10.0    # a cancelled series whose run has not stopped by then is killed

__all__ = ["compare_series"]


def _send(call: Call, stream: RunStream) -> None:
    """What the stream holds now, as the call's events (output, batches, findings, progress)."""
    out, _dropped = stream.drain_output()
    for name, chunk, _lines in out:
        call.emit("output", {"stream": name, "b64": protocol.b64(bytes(chunk))})
    for batch in stream.drain_batches():
        call.emit("batch", batch.to_dict())
    for finding in stream.drain_findings():
        call.emit("finding", finding.to_dict())
    for text in stream.drain_progress():
        call.emit("progress", {"text": text})


def _pump(call: Call, stream: RunStream, series: Any, done: threading.Event) -> None:
    """Send the stream while the series runs; a cancel stops it (and kills a run that lingers)."""
    stopped_at: float | None = None
    waited = 0.0
    while not done.wait(PUMP_S):
        waited += PUMP_S
        _send(call, stream)
        if call.cancelled.is_set() and stopped_at is None:
            series.stop()
            stopped_at = waited
        elif stopped_at is not None and waited - stopped_at > KILL_AFTER_S:
            series.stop()          # its second stop kills the run at once
            stopped_at = float("inf")


def compare_series(call: Call) -> dict[str, Any]:
    """Run ``spec`` under each of ``methods``, ``repeat`` times; ``Comparison.to_dict()``.

    Events: ``output`` ``{stream, b64}``, ``batch``, ``finding``, ``progress`` ``{text}``,
    ``step`` ``{i, n, method, repeat, label}`` before each run, ``started`` ``{run_id, run_dir,
    pid}`` as it starts. The series is recorded here (History lists it as one entry)."""
    from gpuscope import api
    from gpuscope.spec import RunSpec
    from gpuscope.views.run_stream import RunStream
    from gpuscope.views.series_index import save_series

    try:
        spec = RunSpec.from_dict(call.arg("spec", dict))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"compare_series: a spec this agent cannot read ({exc})") from None
    methods = [str(m) for m in call.arg("methods", list)]
    repeat = call.arg("repeat", int)
    stream = RunStream()

    def step(i: int, n: int, method: str, rep: int) -> None:
        label = series.plan()[i - 1][0] if 0 < i <= len(series.plan()) else method
        call.emit("step", {"i": i, "n": n, "method": method, "repeat": rep, "label": label})

    def started(run_id: str, run_dir: str, pid: int) -> None:
        call.emit("started", {"run_id": run_id, "run_dir": run_dir, "pid": pid})

    series, run = api.compare_series(spec, methods, repeat, stream, started=started, progress=step)
    done = threading.Event()
    pump = threading.Thread(target=_pump, args=(call, stream, series, done), name="series pump", daemon=True)
    pump.start()
    try:
        return run().to_dict()
    finally:
        done.set()
        pump.join()
        _send(call, stream)
        groups = {label: list(ids) for label, ids in series.runs.items()}
        if sum(map(len, groups.values())) >= 2:
            save_series(groups, spec, methods, repeat)
