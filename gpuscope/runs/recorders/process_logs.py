"""The event logs gpuscope's injection writes in every Python process, read into process rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.runs.recorder import BaseRecorder, Launch, Outcome, RunContext

if TYPE_CHECKING:
    from gpuscope.trace.events import RunEvents


class EventLogRecorder(BaseRecorder):
    """The injection (boot folder on PYTHONPATH, GPUSCOPE_* variables) is the launcher's; this reads
    what it wrote, through the run's one reader (``ctx.events``): the run's event logs into
    ``outcome.events`` and one row per logged process into ``outcome.processes``."""

    name = "event logs"

    def __init__(self) -> None:
        self._root_role = "main"
        self._run_dir: str | None = None
        self._annotate: tuple[str, ...] = ()
        self._events: RunEvents | None = None

    def prepare(self, launch: Launch) -> None:
        self._root_role = "torchrun agent" if launch.spec.launcher == "torchrun" else "main"
        self._run_dir = launch.run_folder
        self._annotate = tuple(launch.spec.annotate)

    def started(self, ctx: RunContext) -> None:
        """What :meth:`finish` reads the logs with, loaded while the program runs: a short program's
        end does not wait for these imports."""
        from gpuscope.trace import process_rows  # noqa: F401

        self._events = ctx.events

    def main_exited(self, ctx: RunContext) -> None:
        """Read the logs now, while the run's other processes end (the resource tracker, a few ms
        after the main process): :meth:`finish` reads only what they wrote since."""
        if self._events is not None:
            self._events.refresh()

    def finish(self, outcome: Outcome) -> None:
        if not outcome.launched or self._run_dir is None:
            return
        from gpuscope.trace.events import RunEvents
        from gpuscope.trace.process_rows import build_rows

        events = self._events if self._events is not None else RunEvents(self._run_dir)
        events.refresh()
        outcome.events = events
        logs = events.processes()   # read once: the rows, the annotate notes, the findings
        outcome.processes[:] = build_rows(self._run_dir, self._root_role, outcome.exit.code, events=logs)
        if self._annotate:   # per pattern: what it matched, the calls recorded, or a suggestion
            from gpuscope.runs.annotate_notes import annotate_notes

            outcome.notes.extend(annotate_notes(self._run_dir, self._annotate, logs))
