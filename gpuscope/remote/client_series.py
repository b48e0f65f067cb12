"""A start-method series on a remote host as the app runs it: ``api.compare_series``'s
``(series, run)`` pair, answered by the agent's ``compare_series`` op, its events fed into the
caller's ``RunStream`` and callbacks (docs/REMOTE.md)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.remote import client_records as rec

if TYPE_CHECKING:
    from gpuscope.analysis.comparison import Comparison
    from gpuscope.remote.client import RemoteCore
    from gpuscope.spec import RunSpec
    from gpuscope.views.run_stream import RunStream


class RemoteSeries:
    """The series' surface the app uses: ``runs`` (label -> run ids), ``stop()``, ``run()``."""

    saved_there = True    # the agent records the series in the host's store, not this machine's

    def __init__(self, core: RemoteCore, spec: RunSpec, methods: Sequence[str], repeat: int, stream: RunStream,
                 started: Callable[[str, str, int], None] | None = None,
                 progress: Callable[[int, int, str, int], None] | None = None) -> None:
        self.core, self.stream = core, stream
        self.args = {"spec": spec.to_dict(), "methods": list(methods), "repeat": int(repeat)}
        self.on_started, self.on_progress = started, progress
        self.runs: dict[str, list[str]] = {}
        self._label = ""
        self._lock = threading.Lock()
        self._pending: Any = None
        self._stopped = False

    def run(self) -> Comparison:
        """Run the series there (blocking) and return its comparison."""
        from gpuscope.analysis.comparison import Comparison

        with self._lock:
            self._pending = self.core.connection.start("compare_series", self.args, on_event=self._event)
            if self._stopped:
                self._pending.cancel()
        try:
            result = self._pending.wait()
        except UserError as exc:
            text = str(exc)
            raise UserError(text if self.core.host in text else f"{self.core.host}: {text}") from None
        comparison = Comparison.from_dict(result)
        self.runs = {label: list(ids) for label, ids in comparison.runs.items()}
        return comparison

    def stop(self) -> None:
        """End the series there: the run in progress stops, no further run starts."""
        with self._lock:
            self._stopped = True
            pending = self._pending
        if pending is not None:
            pending.cancel()

    def _event(self, kind: str, data: Any) -> None:
        if kind == "output":
            self.stream.on_output(str(data.get("stream", "stdout")), base64.b64decode(data.get("b64") or b""))
        elif kind == "batch":
            from gpuscope.telemetry.batch import SampleBatch

            self.stream.on_batch(SampleBatch.from_dict(data))
        elif kind == "finding":
            self.stream.on_finding(rec.finding(data))
        elif kind == "progress":
            self.stream.on_progress(str(data.get("text", "")))
        elif kind == "step":
            self._label = str(data.get("label") or data.get("method") or "")
            if self.on_progress is not None:
                self.on_progress(int(data["i"]), int(data["n"]), str(data["method"]), int(data["repeat"]))
        elif kind == "started":
            self.runs.setdefault(self._label, []).append(str(data["run_id"]))
            if self.on_started is not None:
                self.on_started(str(data["run_id"]), str(data["run_dir"]), int(data.get("pid") or 0))
