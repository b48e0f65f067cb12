"""Typed records rebuilt from what the agent sends (their ``to_dict`` shapes, docs/REMOTE.md): the
same classes the local calls of :mod:`gpuscope.api` return, so the app cannot tell them apart."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.cleanup.model import ActionResult, ScanResult
    from gpuscope.finding import Finding
    from gpuscope.findings.stacks import ProcessStacks
    from gpuscope.nsys.report import Report
    from gpuscope.runrecord.model import RunRecord
    from gpuscope.views.history import HistoryData

SUMMARY_KEYS = ("nvtx", "kernel", "cuda_api", "memop", "osrt")


class NoTail:
    """A Ray object store's tail for a remote run: its samples stay on the remote."""

    def read_new(self) -> list[dict[str, int]]:
        return []


def finding(data: dict[str, Any]) -> Finding:
    from gpuscope.finding import Finding

    return Finding.from_dict(data)


def run_record(data: dict[str, Any]) -> RunRecord:
    """A run's record from its JSON form (``RunRecord.to_json()``, as ``summary.json``)."""
    from gpuscope.runrecord.model import RunRecord

    return RunRecord.from_json(data, str(data.get("run_dir") or ""), spec=data.get("spec"),
                               versions=data.get("versions"))


def history_data(data: dict[str, Any]) -> HistoryData:
    """The History tab's data: runs (store rows), disk use, series."""
    from gpuscope.views.history import HistoryData

    return HistoryData.from_dict(data)


def series(data: Any) -> dict[str, Any] | None:
    """A run's stored samples (``gpuscope.telemetry.series.load_series``'s dict) from the agent's
    ``series``: arrays back from their encoding, pids and devices back to numbers."""
    if not isinstance(data, dict):
        return None
    out = _arrays(data)
    for key in ("gpus", "processes", "process_info"):
        out[key] = {int(k): v for k, v in (out.get(key) or {}).items()}
    out["gpu_processes"] = {tuple(int(x) for x in str(k).split(":")): v
                            for k, v in (out.get("gpu_processes") or {}).items()}
    return out


def _arrays(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) >= {"dtype", "shape", "b64"}:
            from gpuscope.remote.timelineops import decode_column

            return decode_column(value)
        return {k: _arrays(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_arrays(v) for v in value]
    return value


def roles(data: dict[str, Any]) -> tuple[dict[int, Any], dict[int, int]]:
    """``RoleReader.read()``'s pair: {pid: Identity}, {pid: exit code}."""
    from gpuscope.views.procroles import Identity

    identities = {int(pid): Identity.from_dict(d) for pid, d in (data.get("identities") or {}).items()}
    return identities, {int(pid): int(code) for pid, code in (data.get("exits") or {}).items()}


def stacks(items: Any) -> list[ProcessStacks]:
    from gpuscope.findings.stacks import ProcessStacks

    return [ProcessStacks.from_dict(p) for p in items or []]


def report(data: dict[str, Any], host: str) -> Report:
    """A report's summary tables (``gpuscope report --json``'s object); its timeline stays remote."""
    from gpuscope.finding import Finding
    from gpuscope.nsys.report import Report
    from gpuscope.trace.coverage import Coverage
    from gpuscope.trace.summary import SummaryRow

    summaries = {k: [SummaryRow.from_dict(r) for r in data[f"{k}_summary"]]
                 for k in SUMMARY_KEYS if isinstance(data.get(f"{k}_summary"), list)}
    cov = data.get("coverage")
    coverage = Coverage.from_dict(cov) if isinstance(cov, dict) else None
    notes = [str(n) for n in data.get("notes") or []]
    notes.append(f"on {host}: tables summarised there, the timeline's rows pulled for the whole-run view")
    return Report(path=Path(str(data.get("path") or "")), sqlite_path=None,
                  nsys_version=data.get("nsys_version"), schema_version=data.get("schema_version"),
                  naming=str(data.get("naming") or "plain"), summaries=summaries,
                  processes=list(data.get("processes") or []),
                  findings=[Finding.from_dict({"source": "nsys", **f}) for f in data.get("findings") or []],
                  notes=notes, coverage=coverage, job=data.get("job"))


def scan_result(data: dict[str, Any]) -> ScanResult:
    from gpuscope.cleanup.model import ScanResult

    return ScanResult.from_dict(data)


def action_result(d: dict[str, Any]) -> ActionResult:
    from gpuscope.cleanup.model import ActionResult

    return ActionResult.from_dict(d)
