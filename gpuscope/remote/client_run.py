"""A run on a remote host as the app watches it: the supervisor ``Run``'s surface the app uses,
fed from the agent's ``watch_run`` events into the caller's ``RunStream`` (docs/REMOTE.md). A
re-attach after a dropped connection resumes its output from the offsets already received."""

from __future__ import annotations

import base64
import threading
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.remote import client_records as rec
from gpuscope.remote.batchcodec import BatchReader

if TYPE_CHECKING:
    from gpuscope.finding import Finding
    from gpuscope.remote.client import RemoteCore
    from gpuscope.runrecord.model import RunRecord
    from gpuscope.views.run_stream import RunStream


class RemoteRun:
    """A run on the remote host, watched: the supervisor ``Run``'s surface the app uses."""

    def __init__(self, core: RemoteCore, run_id: str, run_dir: str, stream: RunStream, started_ns: int,
                 offsets: dict[str, int] | None = None) -> None:
        self.core = core
        self.run_id, self.run_dir = run_id, PurePosixPath(run_dir)
        self.stream = stream
        self.started_ns = started_ns
        self.pid = 0
        self.notes: list[str] = []
        self.events = None           # the run's event logs stay on the remote
        self.sampler = None
        self.recorders: list[Any] = []
        self.findings: list[Finding] = []
        self.offsets = dict(offsets or {"stdout": 0, "stderr": 0})
        self.batch_seq = -1          # the last batch received (a re-attach asks for the newer ones)
        self.record: RunRecord | None = None
        self.error: str | None = None
        self.ended = threading.Event()
        self._stops = 0
        self.detached = False
        self._thread: threading.Thread | None = None
        self._batches = BatchReader()
        core.runs[run_id] = self

    def watch(self) -> None:
        """Stream the run's events (from the offsets received so far) on a thread of its own."""
        self.error = None
        self.ended.clear()
        self._thread = threading.Thread(target=self._watch, name=f"watch {self.run_id}", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        try:
            self._batches = BatchReader()     # one per watch: unchanged process rows come as their pid
            args: dict[str, Any] = {"run_id": self.run_id, "offsets": dict(self.offsets), "compact": True}
            if self.batch_seq >= 0:
                args["batch_seq"] = self.batch_seq
            self.core.request("watch_run", args, self._event)
            if self.record is None:
                self.record = self.core.open_run(self.run_id)
        except UserError as exc:
            self.error = (f"run {self.run_id} goes on on {self.core.host}, not watched: connect again to follow it"
                          if self.detached else str(exc))
        except (OSError, EOFError, ConnectionError) as exc:
            self.error = f"{self.core.host}: connection lost ({exc})"
        finally:
            self.ended.set()

    def _event(self, kind: str, data: Any) -> None:
        if kind == "output":
            self._output(data)
        elif kind == "batch":
            batch = self._batches.read(data)
            self.batch_seq = max(self.batch_seq, batch.seq)
            if not self.pid and batch.processes:    # the tree's root: the program's main process
                pids = {p.pid for p in batch.processes}
                self.pid = next((p.pid for p in batch.processes if p.ppid not in pids), 0)
            self.stream.on_batch(batch)
        elif kind == "finding":
            finding = rec.finding(data)
            self.findings.append(finding)
            self.stream.on_finding(finding)
        elif kind == "progress":
            self.stream.on_progress(str(data.get("text", "")))
        elif kind == "ended":
            self.record = rec.run_record(data)

    def _output(self, data: dict[str, Any]) -> None:
        name = str(data.get("stream", "stdout"))
        chunk = base64.b64decode(data.get("b64") or b"")
        offset = int(data.get("offset", self.offsets.get(name, 0)))
        seen = self.offsets.get(name, 0)
        if offset + len(chunk) <= seen:     # re-sent after a re-attach: shown already
            return
        chunk = chunk[max(0, seen - offset):]
        self.offsets[name] = max(seen, offset) + len(chunk)
        self.stream.on_output(name, chunk)

    def detach(self) -> None:
        """Stop watching (the connection closes); the run goes on, on the remote."""
        self.detached = True

    def wait(self, timeout: float | None = None) -> RunRecord:
        """Block until the run has ended (its record), or the watch was lost (a UserError)."""
        self.ended.wait(timeout)
        if self.record is None:
            raise UserError(self.error or f"{self.core.host}: run {self.run_id} is still running")
        return self.record

    def stop(self, kill: bool = False) -> None:
        """Stop the run on the remote; a second call kills it."""
        self._stops += 1
        self.core.call("stop_run", run_id=self.run_id, kill=kill or self._stops > 1)
