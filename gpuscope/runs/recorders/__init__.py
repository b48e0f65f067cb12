"""The recorders every run has (event logs, telemetry, and nsys when asked), in finishing order.

Each one is a :class:`gpuscope.runs.recorder.BaseRecorder`; see that module for the lifecycle.
Callers add their own with ``Run(spec, recorders=[...])``; those come after these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.runs.recorder import BaseRecorder
from gpuscope.spec import RunSpec

if TYPE_CHECKING:
    from typing import Any


def default_recorders(spec: RunSpec, store_path: Any = None) -> list[BaseRecorder]:
    """Event logs first (they fill the process rows the others add to), then telemetry, then nsys."""
    from gpuscope.runs.recorders.process_logs import EventLogRecorder
    from gpuscope.runs.recorders.telemetry_sampling import TelemetryRecorder

    from gpuscope.runs.recorders.ray_object_store import RayObjectStoreRecorder

    # the Ray object store probe starts only when the run starts a Ray cluster
    recorders: list[BaseRecorder] = [EventLogRecorder(), TelemetryRecorder(store_path), RayObjectStoreRecorder()]
    if spec.nsys.enabled:
        from gpuscope.runs.recorders.nsys_recording import NsysRecorder

        recorders.append(NsysRecorder())
    if spec.torch_profile.enabled:   # after the event logs: their process rows say why a trace is missing
        from gpuscope.runs.recorders.torch_profile import TorchProfileRecorder

        recorders.append(TorchProfileRecorder())
    if spec.multinode:   # last: copies what the others wrote into the job folder
        from gpuscope.runs.recorders.node_job import NodeJobRecorder

        recorders.append(NodeJobRecorder())
    return recorders
