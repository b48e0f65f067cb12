"""The agent's pool flow arrows: a report's flows (a pool job's submission to each of its tasks,
:mod:`gpuscope.trace.flows`) read from the run folder's event logs there, on the time base of the
report the agent keeps for its timeline pages, so the window never reads the remote's folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.remote.call import Call

__all__ = ["timeline_flows"]


def timeline_flows(call: Call) -> dict[str, Any] | None:
    """``{"columns": {field: encoded column}}`` of the report's ``Flows`` (``run`` or ``path``, as
    ``timeline_page``); None for a report that is no run folder (a bare export has no event logs)."""
    from dataclasses import fields

    from gpuscope.remote.timelineops import encode_column, kept_report
    from gpuscope.trace.flows import Flows, run_flows

    report = kept_report(call)
    folder = Path(str(getattr(report, "path", "") or ""))
    if not folder.is_dir():
        return None
    flows = run_flows(folder, report.timeline)
    return {"columns": {f.name: encode_column(getattr(flows, f.name)) for f in fields(Flows)}}
