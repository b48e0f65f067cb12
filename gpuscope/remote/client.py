"""The client core: the calls of :mod:`gpuscope.api` the app uses, answered by an agent on a remote host.

A :class:`RemoteCore` wraps one agent connection (:mod:`gpuscope.remote.connection`) and returns the
same typed records the local calls return, rebuilt from their ``to_dict`` shapes (docs/REMOTE.md).
A run started through it is a :class:`~gpuscope.remote.client_run.RemoteRun` (client_run.py).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from gpuscope.errors import UserError
from gpuscope.remote import client_records as rec
from gpuscope.remote.client_run import RemoteRun

if TYPE_CHECKING:
    from gpuscope.analysis.comparison import Comparison
    from gpuscope.finding import Finding
    from gpuscope.findings.stacks import ProcessStacks
    from gpuscope.nsys.report import Report
    from gpuscope.remote.client_series import RemoteSeries
    from gpuscope.remote.connection import Connection
    from gpuscope.runrecord.model import RunRecord
    from gpuscope.spec import RunSpec
    from gpuscope.views.history import HistoryData
    from gpuscope.views.past_run import PastRun
    from gpuscope.views.run_stream import RunStream

OUTPUT_TAIL = 4 << 20     # bytes of a past run's output pulled (as much as a local past run shows)
DOWNLOAD_PIECE = 4 << 20  # one read_file answer (the agent's most): progress and resume in these steps


class RemoteCore:
    """``gpuscope.api``'s calls (those the app makes) on the host of ``connection``."""

    def __init__(self, connection: Connection, host: str) -> None:
        self.connection = connection
        self.host = host
        self.hello: dict[str, Any] = dict(connection.hello)
        self.runs: dict[str, RemoteRun] = {}     # runs watched through this core, by id

    # -- plumbing -------------------------------------------------------------------------------
    def call(self, op: str, **args: Any) -> Any:
        """One request to the agent; its ``ok: false`` reply is a UserError naming the host."""
        return self.request(op, args)

    def request(self, op: str, args: dict[str, Any], on_event: Callable[[str, Any], None] | None = None) -> Any:
        """A request whose events (a stream) go to ``on_event`` on the connection's reader thread."""
        try:
            return self.connection.request(op, args, on_event=on_event)
        except UserError as exc:
            text = str(exc)
            raise UserError(text if self.host in text else f"{self.host}: {text}") from None

    @property
    def alive(self) -> bool:
        return not self.connection.closed

    def close(self) -> None:
        """Close the connection; the remote's detached runs go on."""
        for run in list(self.runs.values()):
            run.detach()
        self.connection.close()

    # -- runs -----------------------------------------------------------------------------------
    def start_run(self, spec: RunSpec, stream: RunStream) -> RemoteRun:
        """Start ``spec`` on the remote (detached there) and watch it into ``stream``."""
        started = self.call("start_run", spec=spec.to_dict())
        run = RemoteRun(self, str(started["run_id"]), str(started["run_dir"]), stream,
                        started_ns=int(started.get("started_ns") or time.time_ns()))
        run.pid = int(started.get("program_pid") or 0)    # ("pid" is the run's host process there)
        run.watch()
        return run

    def active_runs(self) -> list[dict[str, Any]]:
        """The remote's runs still going: ``{"run_id", "run_dir", "started_ns", "argv"}`` each."""
        return list(self.call("active_runs") or [])

    def reattach(self, info: dict[str, Any], stream: RunStream) -> RemoteRun:
        """Watch a run still going (one of :meth:`active_runs`) into ``stream`` again; output
        already received through this core is not sent twice."""
        run_id = str(info["run_id"])
        old = self.runs.get(run_id)
        run = RemoteRun(self, run_id, str(info["run_dir"]), stream,
                        started_ns=int(info.get("started_ns") or 0) or time.time_ns(),
                        offsets=old.offsets if old is not None else None)
        run.pid = int(info.get("program_pid") or 0)
        run.batch_seq = old.batch_seq if old is not None else -1
        run.watch()
        return run

    def live_findings(self, run: RemoteRun) -> list[Finding]:
        from gpuscope.finding import merge

        return merge(run.findings)

    def gpu_unavailable_reason(self, run: Any = None) -> str | None:
        """What the agent said of the remote's GPU in its hello (None: a GPU, or not said)."""
        reason = self.hello.get("gpu_reason")
        return str(reason) if reason else None

    def main_exited(self, run_dir: str) -> bool:
        return bool(self.call("main_exited", run_dir=str(run_dir)))

    def stop_process(self, pid: int, start_time: float | None, kill: bool, grace_s: float,
                     run_id: str | None = None) -> Any:
        """One process of a remote run stopped there (cleanup's safety rules); None: it had ended."""
        res = self.call("stop_process", pid=pid, start_time=start_time, kill=kill, grace_s=grace_s, run_id=run_id)
        return rec.action_result(res) if res is not None else None

    # -- stored runs ----------------------------------------------------------------------------
    def history(self, limit: int = 200) -> HistoryData:
        return rec.history_data(self.call("history", limit=limit))

    def delete_runs(self, ids: Sequence[str]) -> tuple[int, int]:
        res = self.call("delete_runs", ids=list(ids))
        return int(res.get("deleted", 0)), int(res.get("freed", 0))

    def open_run(self, ref: str) -> RunRecord:
        return rec.run_record(self.call("open_run", ref=str(ref)))

    def open_past_run(self, run_id: str, run_dir: str, started_ns: int | None = None) -> PastRun:
        """The remote run's stored samples, roles, output tails, findings and last stacks."""
        from gpuscope.views.past_run import PastRun

        try:
            samples = rec.series(self.call("series", run_id=run_id))
        except UserError:        # an agent without the op: the plots stay empty
            samples = None
        past = PastRun(run_id, PurePosixPath(run_dir), samples, started_ns=started_ns)   # type: ignore[arg-type]
        for stream in ("stdout", "stderr"):
            data, cut = self._tail(f"{run_dir}/{stream}.log")
            if data:
                past.output.append((stream, data))
            if cut:
                past.truncated[stream] = cut
        past.identities = self.role_reader(run_dir).lookup()
        try:
            record = self.open_run(run_id)
            past.rows = (list(record.processes), list(record.left_running))
        except UserError:        # no record there (a run cut off before it wrote one): names only
            pass
        past.findings = self.findings(run_dir)
        taken, procs = self.latest_stacks(run_dir)
        past.stacks = (taken, procs) if procs else None
        return past

    def _tail(self, path: str) -> tuple[bytes, int]:
        try:
            size = int(self.call("read_file", path=path, offset=0, length=1).get("size", 0))
        except UserError:
            return b"", 0
        start = max(0, size - OUTPUT_TAIL)
        data = self.read_bytes(path, start, size - start)
        if start:
            data = data[data.find(b"\n") + 1:]
        return data, start

    def read_bytes(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of a remote file from ``offset`` (fewer at its end)."""
        parts = []
        while length > 0:
            piece = base64.b64decode(self.call("read_file", path=path, offset=offset, length=length).get("b64") or b"")
            if not piece:
                break
            parts.append(piece)
            offset, length = offset + len(piece), length - len(piece)
        return b"".join(parts)

    def download(self, path: str, dest: str | Path, progress: Callable[[int, int], None] | None = None,
                 cancel: threading.Event | None = None) -> Path:
        """Copy a remote file to ``dest`` piece by piece (``progress(done, size)`` after each); a copy
        stopped before (``dest`` + ".part") resumes where it ended."""
        dest = Path(dest)
        part = dest.with_name(dest.name + ".part")
        size = int(self.call("read_file", path=path, offset=0, length=1).get("size", 0))
        offset = part.stat().st_size if part.exists() else 0
        if offset > size:      # the remote file is another one now: start again
            offset = 0
        with open(part, "ab" if offset else "wb") as fh:
            while offset < size:
                if cancel is not None and cancel.is_set():
                    raise UserError(f"download of {path} stopped at {offset:,} of {size:,} bytes: "
                                    "download it again to resume")
                res = self.call("read_file", path=path, offset=offset, length=DOWNLOAD_PIECE)
                data = base64.b64decode(res.get("b64") or b"")
                if not data:
                    break
                fh.write(data)
                offset += len(data)
                if progress is not None:
                    progress(offset, size)
        part.replace(dest)
        return dest

    def list_dir(self, path: str) -> tuple[str, list[dict[str, Any]]]:
        """A remote folder: (its absolute path, its entries ``{"name", "dir", "size"}``)."""
        res = self.call("list_dir", path=path)
        return str(res.get("path") or path), list(res.get("entries") or [])

    def load_report(self, path: str, events_only: bool = False, note: str | None = None,
                    cancel: threading.Event | None = None) -> Report:
        """The report's summary tables, summarised on the remote; its timeline's whole-run view is
        pulled when first drawn (``Report.timeline``)."""
        key = "run" if not str(path).endswith((".nsys-rep", ".sqlite")) else "path"
        report = rec.report(self.call("report_summary", **{key: str(path)}), self.host)
        from gpuscope.remote.client_timeline import overview

        counts: dict[str, int] = {}
        report.loader = lambda: overview(self, {key: str(path)}, counts)   # pulled when the view lays it out
        report.remote = RemoteTimeline(self, {key: str(path)}, counts)   # type: ignore[attr-defined]
        return report

    def saved_findings(self, run_dir: str) -> list[Finding]:
        return self.findings(run_dir)

    def findings(self, run_dir: str) -> list[Finding]:
        from gpuscope.finding import Finding

        return [Finding.from_dict(f) for f in self.call("findings", run=str(run_dir)) or []]

    def ray_store_tail(self, run_dir: str) -> Any:
        return rec.NoTail()

    def role_reader(self, run_dir: Any) -> Any:
        """The processes' roles of a run there (its event logs stay there): ``RoleReader``'s surface."""
        return RemoteRoles(self, str(run_dir))

    # -- stacks ---------------------------------------------------------------------------------
    def take_stacks(self, run_id: str, run_dir: str, timeout_s: float = 5.0
                    ) -> tuple[int | None, bool, list[ProcessStacks]]:
        res = self.call("stacks", run_id=run_id, take=True)
        return res.get("taken_ns"), bool(res.get("live")), rec.stacks(res.get("processes"))

    def latest_stacks(self, run_dir: str) -> tuple[int | None, list[ProcessStacks]]:
        try:
            res = self.call("stacks", run_id=PurePosixPath(str(run_dir)).name, take=False)
        except UserError:
            return None, []
        return res.get("taken_ns"), rec.stacks(res.get("processes"))

    # -- compare --------------------------------------------------------------------------------
    def compare_runs(self, ids: Sequence[str]) -> Comparison:
        """Recorded runs of the host compared there (``Comparison.to_dict()`` pulled)."""
        from gpuscope.analysis.comparison import Comparison

        return Comparison.from_dict(self.call("compare_runs", ids=list(ids)))

    def compare_series(self, spec: RunSpec, methods: Sequence[str], repeat: int, stream: RunStream,
                       started: Callable[[str, str, int], None] | None = None,
                       progress: Callable[[int, int, str, int], None] | None = None
                       ) -> tuple[RemoteSeries, Callable[[], Comparison]]:
        """A series run there (the agent's ``compare_series``): ``(series, run)`` as ``api.compare_series``."""
        from gpuscope.remote.client_series import RemoteSeries

        series = RemoteSeries(self, spec, methods, repeat, stream, started, progress)
        return series, series.run

    def series_progress_text(self, i: int, n: int, method: str, repeat: int) -> str:
        from gpuscope import api

        return api.series_progress_text(i, n, method, repeat)

    # -- cleanup --------------------------------------------------------------------------------
    def cleanup_scanner(self, conn: Any = None, **options: Any) -> tuple[RemoteScanner, Any]:
        return RemoteScanner(self, options), None

    def cleanup_apply(self, suspects: Sequence[Any], force: bool, grace_s: float, conn: Any) -> list[Any]:
        res = self.call("cleanup_apply", keys=[s.key for s in suspects], force=force, grace_s=grace_s)
        return [rec.action_result(r) for r in res or []]


class RemoteRoles:
    """``gpuscope.views.procroles.RoleReader`` for a remote run: ``read()`` asks the agent's ``roles``."""

    def __init__(self, core: RemoteCore, run_dir: str) -> None:
        self.core, self.run_dir = core, run_dir
        self._last: tuple[dict[int, Any], dict[int, int]] = ({}, {})

    def read(self) -> tuple[dict[int, Any], dict[int, int]]:
        if threading.current_thread() is threading.main_thread() and self._last[0]:
            return dict(self._last[0]), dict(self._last[1])   # the GUI thread never waits on the link
        try:
            self._last = rec.roles(self.core.call("roles", run_dir=self.run_dir))
        except UserError:       # an agent without the op, or a link down: the names stay as they are
            pass
        return dict(self._last[0]), dict(self._last[1])

    def lookup(self) -> dict[int, Any]:
        return self.read()[0]

    def exits(self) -> dict[int, int]:
        return self.read()[1]


class RemoteTimeline:
    """Where a remote report's timeline rows come from: finer ones are pulled as the user zooms."""

    def __init__(self, core: RemoteCore, target: dict[str, str], counts: dict[str, int]) -> None:
        self.core, self.target, self.counts = core, target, counts    # counts: filled by the first pull
        self._flows: Any = ...

    def flows(self) -> Any:
        """The pool flow arrows, read there from the run's event logs (asked once)."""
        if self._flows is ...:
            from gpuscope.remote.client_timeline import flows

            self._flows = flows(self.core, self.target)
        return self._flows

    def refine(self, tl: Any, t0_ns: int, t1_ns: int, min_ns: int) -> tuple[Any, int]:
        from gpuscope.remote.client_timeline import refine

        return refine(self.core, self.target, tl, self.counts, t0_ns, t1_ns, min_ns)


class RemoteScanner:
    """Cleanup's scanner, on the remote: each ``scan`` lists the remote machine's leftovers."""

    def __init__(self, core: RemoteCore, options: dict[str, Any]) -> None:
        self.core = core
        self.options = {k: v for k, v in options.items() if isinstance(v, (int, float, str, bool))}

    def observe(self, *args: Any) -> None:
        """The agent observes when it scans (its listing samples the processes itself)."""

    def scan(self, *args: Any) -> Any:
        return rec.scan_result(self.core.call("cleanup_scan", options=self.options))

    def close(self) -> None:
        pass
