"""The one status line of a finished run (Qt-free: the app's status bar and its leftovers line)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.runs.supervisor import RunResult


def describe_result(result: RunResult) -> str:
    """One status line for a finished run."""
    secs = (result.ended_ns - result.started_ns) / 1e9
    line = f"run {result.run_id} {result.status.describe(result.exit)} after {secs:.1f} s"
    if result.error:
        line += f"; {result.error}"
    if result.left_running:
        line += f"; {len(result.left_running)} process(es) still running (see Cleanup)"
    return line
