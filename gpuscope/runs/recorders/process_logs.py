"""The event logs gpuscope's injection writes in every Python process, read into process rows."""

from __future__ import annotations

from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuscope.trace.events import LogsReadAhead


class EventLogRecorder(BaseRecorder):
    """The injection (boot folder on PYTHONPATH, GPUSCOPE_* variables) is the launcher's; this reads
    what it wrote: one row per logged process into ``outcome.processes``."""

    name = "event logs"

    def __init__(self) -> None:
        self._root_role = "main"
        self._run_dir: str | None = None
        self._annotate: tuple[str, ...] = ()
        self._ahead: LogsReadAhead | None = None    # read when the main process ended

    def prepare(self, launch: Launch) -> None:
        self._root_role = "torchrun agent" if launch.spec.launcher == "torchrun" else "main"
        self._run_dir = launch.run_folder
        self._annotate = tuple(launch.spec.annotate)

    def started(self, ctx: RunContext) -> None:
        """What :meth:`finish` reads the logs with, loaded while the program runs: a short program's
        end does not wait for these imports (issue 14.4)."""
        from gpuscope.trace import events, process_rows  # noqa: F401

    def main_exited(self, ctx: RunContext) -> None:
        """Read the logs now, while the run's other processes end (the resource tracker, a few ms
        after the main process): :meth:`finish` reads again only the ones that changed since."""
        if self._run_dir is None:
            return
        from gpuscope.trace.events import read_logs_ahead

        self._ahead = read_logs_ahead(self._run_dir)

    def finish(self, outcome: Outcome) -> None:
        if not outcome.launched or self._run_dir is None:
            return
        from gpuscope.trace.events import read_run_events
        from gpuscope.trace.process_rows import collect_processes

        ahead, self._ahead = self._ahead, None
        events = read_run_events(self._run_dir, ahead)   # read once: the rows, the annotate notes, the findings
        outcome.extra["events"] = events
        outcome.processes[:] = collect_processes(self._run_dir, self._root_role, outcome.exit.code, events)
        if self._annotate:   # per pattern: what it matched, the calls recorded, or a suggestion
            from gpuscope.runs.annotate_notes import annotate_notes

            outcome.notes.extend(annotate_notes(self._run_dir, self._annotate, events))
