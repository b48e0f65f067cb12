"""The Attached tab's presenter: one :class:`gpuscope.attach.session.AttachSession` shown in the run
view's widgets, File → Attach to a running job…, Take stacks, Profile 5 s and Detach.

The session's sampler hands its batches to a :class:`~gpuscope.views.run_stream.RunStream` on its
own thread; a GUI timer drains them into the model, and about once a second reads the session's
view (roles, findings, refusals). Every blocking call (attach, stacks, profile, detach) runs on a
pool thread. It never reaches into the main window: what the window must do goes out as a signal.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction

from gpuscope.app import workers
from gpuscope.app.attach.qt_attach_tab import AttachTab
from gpuscope.views import attach_picker
from gpuscope.views.live_model import LiveModel
from gpuscope.views.run_stream import RunStream

if TYPE_CHECKING:
    from gpuscope.attach.profile import Profile
    from gpuscope.attach.session import AttachSession
    from gpuscope.attach.stacks import TreeStacks
    from gpuscope.attach.view import AttachView

TICK_MS = 200
VIEW_EVERY = 5          # ticks between two reads of the session's view (roles, findings, refusals)


def open_session(root_pid: int) -> AttachSession:
    """Adopt the tree and take its first picture (blocking: a pool thread)."""
    from gpuscope.attach.session import AttachSession

    session = AttachSession(root_pid)
    session.start()
    return session


def _opened(opener: Callable[[int], AttachSession], root_pid: int) -> tuple[AttachSession, str | None]:
    """The session, and why there are no GPU plots (None: its sampler reads a GPU)."""
    session = opener(root_pid)
    gpu = session.sampler.gpu if session.sampler is not None else None
    return session, None if gpu is None or gpu.available else (gpu.reason or "no NVIDIA GPU")


class AttachPresenter(QObject):
    """Signals: ``sigStatus(text)``, ``sigError(text)``, ``sigShow()`` (show the Attached tab),
    ``sigAttached(view)``, ``sigDetached(run_id)`` (the session is a run in History now),
    ``sigCleanup()``. ``opener(pid)`` starts a session (blocking; tests may pass their own options)."""

    sigStatus = Signal(str)
    sigError = Signal(str)
    sigShow = Signal()
    sigAttached = Signal(object)
    sigDetached = Signal(str)
    sigCleanup = Signal()

    def __init__(self, parent: QObject | None = None,
                 opener: Callable[[int], AttachSession] = open_session) -> None:
        super().__init__(parent)
        self.opener = opener
        self.model = LiveModel()
        self.stream = RunStream()
        self.tab = AttachTab(self.model)
        self.session: AttachSession | None = None
        self.view: AttachView | None = None
        self.last_stacks: TreeStacks | None = None
        self.last_profile: Profile | None = None
        self.detached_run: str | None = None
        self._pending: workers.Task | None = None      # attaching or detaching
        self._ticks = 0
        self._closed = False
        self.menu_action: QAction | None = None      # File → Attach to a running job… (install)
        t = self.tab
        t.stacks_button.clicked.connect(self.take_stacks)
        t.stacks.sigTake.connect(self.take_stacks)
        t.profile_button.clicked.connect(lambda: self.profile(5.0))
        t.profile.sigProfile.connect(self.profile)
        t.detach_button.clicked.connect(self.detach)
        t.tree.sigShowStacks.connect(self._stacks_of)
        t.tree.sigMessage.connect(lambda text, error: (self.sigError if error else self.sigStatus).emit(text))
        t.tree.sigFindingClicked.connect(lambda code, pid: t.live.findings.view.select(code, pid))
        strip = t.live.findings.view
        strip.sigStacks.connect(lambda: t.bottom.setCurrentWidget(t.stacks))
        strip.sigCleanup.connect(lambda _fix: self.sigCleanup.emit())
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self.tick)

    @property
    def busy(self) -> bool:
        """A job is followed (or being attached)."""
        return self.session is not None or self._pending is not None

    # -- attaching ------------------------------------------------------------------------------
    def attach(self, root_pid: int) -> workers.Task | None:
        if self.busy:
            self.sigError.emit("already attached to a job: detach first")
            return None
        self._reset(f"attaching to pid {root_pid}…")
        self.sigShow.emit()
        self.sigStatus.emit(f"attaching to pid {root_pid}…")
        self._pending = workers.submit(lambda task: _opened(self.opener, root_pid), on_done=self._attached,
                                       on_error=self._attach_failed, label=f"attaching to pid {root_pid}")
        return self._pending

    def _reset(self, title: str) -> None:
        self.stream.drain_batches()
        self.tab.live.reset(title)
        self.tab.tree.reset_rows()
        self.tab.stacks.clear()
        self.tab.show_refused([])
        self.view = self.last_stacks = self.last_profile = None
        self.detached_run = None
        self.tab.state.setText(title)

    def _attached(self, opened: tuple[AttachSession, str | None]) -> None:
        self._pending = None
        session, gpu_reason = opened
        if self._closed:              # the window closed while attaching: leave at once, recorded
            session.detach()
            return
        self.tab.live.set_gpu_reason(gpu_reason)
        self.session = session
        assert session.sampler is not None
        session.sampler.add_listener(self.stream.on_batch)
        self.tab.tree.run_id = session.run_id
        self.tab.live.findings.view.set_live(True)
        self.tab.set_attached(True)
        view = session.view()
        self.tab.live.title.setText(attach_picker.title_text(view))
        self._show_view(view)
        self.timer.start()
        self.sigStatus.emit(f"attached to pid {session.root_pid}: {attach_picker.state_line(view)}")
        self.sigAttached.emit(view)

    def _attach_failed(self, text: str) -> None:
        self._pending = None
        self.tab.state.setText(f"not attached: {text}")
        self.sigError.emit(text)

    # -- the tick -------------------------------------------------------------------------------
    def tick(self) -> None:
        """Drain the sampler's batches into the plots and table; every few ticks, the session's view."""
        session = self.session
        if session is None:
            return
        self._ticks += 1
        for batch in self.stream.drain_batches():
            self.model.add(batch)
        if self._ticks % VIEW_EVERY == 0 or self.view is None:
            self._show_view(session.view())
        self.tab.live.set_elapsed(self.model.last_t, "attached")
        self.tab.live.refresh()
        self.tab.tree.refresh()
        if self.view is not None and self.view.ended and self._pending is None:
            self.sigStatus.emit("the attached job has ended")
            self.detach()

    def _show_view(self, view: AttachView) -> None:
        self.view = view
        session = self.session
        if session is not None and session.sampler is not None:
            self._fill_start_times(session.sampler.process_summary())
        self._add_rows(view)
        self.model.set_identities(attach_picker.identities(view))
        self.tab.live.findings.set_findings(view.findings, session.started_ns if session else None)
        self.tab.tree.set_findings(view.findings)
        self.tab.show_refused(attach_picker.refusal_lines(view))
        idle = session.idle_s() if session is not None and not view.ended else None
        self.tab.state.setText(attach_picker.state_line(view, idle))

    def _add_rows(self, view: AttachView) -> None:
        """Rows for the processes the session saw before the sampler's batches reach the model
        (its first picture): the table is full at once; the batches update them."""
        from gpuscope.views.live_model import ProcRow

        added = False
        for p in view.processes:
            if p.pid not in self.model.procs and p.alive:
                name = os.path.basename(p.cmdline[0]) if p.cmdline else "?"
                self.model.procs[p.pid] = ProcRow(p.pid, p.ppid, name, p.state, None, p.rss_bytes, p.gpu_mem_bytes,
                                                  role=p.role, rank=p.rank,
                                                  create_time=self.model.create_times.get(p.pid))
                added = True
        if added:
            self.model.version += 1

    def _fill_start_times(self, summary: dict[int, dict[str, Any]]) -> None:
        """The identity Stop/Kill re-checks: each process's start time as the sampler first saw it."""
        for pid, info in summary.items():
            start = info.get("create_time")
            if start is None or pid in self.model.create_times:
                continue
            self.model.create_times[pid] = start
            row = self.model.procs.get(pid)
            if row is not None and row.create_time is None:
                row.create_time = start

    # -- actions --------------------------------------------------------------------------------
    def take_stacks(self, pid: int | None = None) -> workers.Task | None:
        """Every live Python process's stacks now, grouped in the Stacks tab."""
        session = self.session
        if session is None:
            self.sigStatus.emit("no attached job to take stacks of")
            return None
        stacks = self.tab.stacks
        stacks.want_pid = pid
        stacks.set_busy("taking the stacks of every process of the job…")
        self.tab.bottom.setCurrentWidget(stacks)

        def done(got: TreeStacks) -> None:
            self.last_stacks = got
            stacks.set_can_take(self.session is not None)
            how = "without pausing them" if got.nonblocking else "pausing each while it was read"
            stacks.show_stacks(got.processes, got.taken_ns, live=True,
                               why=f"read in {got.seconds:.2f} s, {how}")
            self.tab.show_refused(attach_picker.refusal_lines(session.view()))

        def failed(text: str) -> None:
            stacks.set_can_take(self.session is not None)
            self.sigError.emit(text)

        return workers.submit(lambda task: session.take_stacks(), on_done=done, on_error=failed, label="stacks")

    def _stacks_of(self, pid: int) -> None:
        self.take_stacks(pid)

    def profile(self, seconds: float = 5.0) -> workers.Task | None:
        """A CPU profile of every Python process of the job: top functions per role, flame graph."""
        session = self.session
        if session is None:
            self.sigStatus.emit("no attached job to profile")
            return None
        panel = self.tab.profile
        panel.set_busy(seconds)
        self.tab.profile_button.setEnabled(False)
        self.tab.bottom.setCurrentWidget(panel)

        def done(prof: Profile) -> None:
            self.last_profile = prof
            self.tab.profile_button.setEnabled(self.session is not None)
            panel.set_can_profile(self.session is not None)
            roles = {p.pid: p.role for p in session.view().processes}
            panel.set_profile(prof, roles)
            self.sigStatus.emit(attach_picker.profile_line(prof))

        def failed(text: str) -> None:
            self.tab.profile_button.setEnabled(self.session is not None)
            panel.set_can_profile(self.session is not None)
            self.sigError.emit(text)

        return workers.submit(lambda task: session.profile(seconds), on_done=done, on_error=failed,
                              label=f"profiling for {seconds:g} s")

    def detach(self) -> workers.Task | None:
        """Stop following (the job goes on untouched); the session becomes a run in History."""
        session = self.session
        if session is None or self._pending is not None:
            return None
        self.tab.set_attached(False)
        self.tab.detach_button.setEnabled(False)
        self._pending = workers.submit(lambda task: session.detach(), on_done=self._detached,
                                       on_error=self._detach_failed, label="detaching")
        return self._pending

    def _detached(self, view: AttachView) -> None:
        self._pending = None
        self.session = None
        self.timer.stop()
        for batch in self.stream.drain_batches():
            self.model.add(batch)
        self.view = view
        self.model.set_identities(attach_picker.identities(view))
        self.model.finished = True      # no Stop/Kill from the table once no longer followed
        self.tab.live.findings.view.set_live(False)
        self.tab.live.findings.set_findings(view.findings)
        self.tab.tree.set_findings(view.findings)
        self.tab.tree.refresh()
        self.tab.live.refresh()
        self.detached_run = view.run_id
        kept = f"; kept as run {view.run_id} (History)" if view.run_id else ""
        self.tab.state.setText(("the job has ended" if view.ended else "detached: the job goes on") + kept)
        self.sigStatus.emit(self.tab.state.text())
        self.sigDetached.emit(view.run_id)

    def _detach_failed(self, text: str) -> None:
        self._pending = None
        self.session = None
        self.timer.stop()
        self.sigError.emit(text)

    def close(self) -> None:
        """The window closes: detach now (blocking), so the session is recorded and its threads end."""
        self._closed = True
        self.timer.stop()
        session, self.session = self.session, None
        if session is not None:
            try:
                session.detach()
            except Exception:  # noqa: BLE001 - closing: a failed record must not keep the window open
                pass


def install(window: Any) -> AttachPresenter:
    """File → Attach to a running job… in ``window`` (the main window), and its Attached tab, added
    on the first attach."""
    presenter = AttachPresenter(window)
    menu = window.file_menu
    quit_action = next((a for a in menu.actions() if a.text().replace("&", "") == "Quit"), None)
    action = presenter.menu_action = menu.addAction("&Attach to a running job…")
    if quit_action is not None:
        menu.insertAction(quit_action, action)
        menu.insertSeparator(quit_action)
    action.setToolTip("follow a Python job gpuscope did not start: its processes, stacks and a CPU profile")

    def ask() -> None:
        from gpuscope.app.run.qt_attach_dialog import QtAttachDialog

        dialog = QtAttachDialog(window)
        if dialog.exec() and dialog.chosen_pid is not None:
            presenter.attach(dialog.chosen_pid)

    def show() -> None:
        tabs = window.tabs
        if tabs.indexOf(presenter.tab) < 0:
            tabs.addTab(presenter.tab, "Attached")
        tabs.setCurrentWidget(presenter.tab)

    action.triggered.connect(ask)
    presenter.sigShow.connect(show)
    presenter.sigStatus.connect(window.show_status)
    presenter.sigError.connect(window.show_error)
    presenter.sigCleanup.connect(lambda: window.tabs.setCurrentWidget(window.cleanup))
    presenter.sigDetached.connect(lambda _run: window.history.refresh()
                                  if window.tabs.currentWidget() is window.history else None)
    return presenter
