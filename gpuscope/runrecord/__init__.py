"""One run's typed record (:class:`RunRecord`, its :class:`ProcessRow` s), read from its folder
(:func:`read_folder`; by id or folder: ``gpuscope.store.lookup.open_run``)."""

from gpuscope.runrecord.folder import read_folder
from gpuscope.runrecord.model import NsysSummary, RunRecord
from gpuscope.trace.process_row import ProcessRow, SampledProcess

__all__ = ["NsysSummary", "ProcessRow", "RunRecord", "SampledProcess", "read_folder"]
