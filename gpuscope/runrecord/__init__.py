"""One run's typed record (:class:`RunRecord`, its :class:`ProcessRow` s) and the one way to open a
run (:func:`open_run`)."""

from gpuscope.runrecord.folder import find_run, latest_run, open_run, read_folder
from gpuscope.runrecord.model import NsysSummary, RunRecord, SampledProcess
from gpuscope.trace.process_row import ProcessRow

__all__ = ["NsysSummary", "ProcessRow", "RunRecord", "SampledProcess", "find_run", "latest_run", "open_run",
           "read_folder"]
