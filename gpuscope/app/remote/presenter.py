"""File → Connect to host…, Disconnect and Reconnect: the window switched to a remote host's core.

Connecting runs on a worker (ssh, the agent's check or install, its hello); once connected every
view calls the host's :class:`~gpuscope.remote.client.RemoteCore` through the core handle
(:mod:`gpuscope.app.remote.core`). The window says which host it shows (its title and a status-bar
label). A dropped connection is one line; the views keep what they showed; Reconnect re-attaches
to the runs still going there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QSettings, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QWidget

from gpuscope.app import bridge, workers
from gpuscope.app.remote import core as handle
from gpuscope.app.remote.hosts import push_host, recent_hosts
from gpuscope.remote.client import RemoteCore
from gpuscope.views.launch_checks import default_python

if TYPE_CHECKING:
    from gpuscope.app.run.qt_launch_panel import QtLaunchPanel
    from gpuscope.app.run.session import RunSession
    from gpuscope.app.widgets.qt_status import QtStatus

Progress = Callable[[str, "float | None"], None]
Connector = Callable[[str, Progress], Any]     # (host text, progress) -> an agent Connection
CONNECT_AT_START: list[str] = []     # `gpuscope gui --host H`: connect as the window opens


def ssh_connector(host: str, progress: Progress) -> Any:
    """The agent on ``host`` over the system's ssh (checked or installed first), connected."""
    from gpuscope.remote.bootstrap import open_agent
    from gpuscope.remote.connection import Connection
    from gpuscope.remote.hostspec import HostSpec

    spec = HostSpec.parse(host)
    return Connection(open_agent(spec, progress), host=str(spec))


class RemotePresenter(QObject):
    """The parts it drives are given (settings, the status bar's tasks, the run session, the launch
    panel); what the window must do goes out as signals: ``sigStatus(text)``, ``sigError(text)``,
    ``sigTitle(text)``, ``sigHostChanged()`` (views to read again), and ``sigConnected(host)``,
    ``sigDisconnected(host)``, ``sigDropped(line)``, ``sigReattached(run_id)``."""

    sigStatus = Signal(str)
    sigError = Signal(str)
    sigTitle = Signal(str)
    sigHostChanged = Signal()
    sigConnected = Signal(str)
    sigDisconnected = Signal(str)
    sigDropped = Signal(str)
    sigReattached = Signal(str)

    def __init__(self, settings: QSettings, status: QtStatus, session: RunSession, panel: QtLaunchPanel,
                 busy: Callable[[], bool], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings, self.status, self.session, self.panel = settings, status, session, panel
        self.busy = busy                  # a run or a series in progress here
        self.parent_widget = parent       # of the dialogs
        self.connector: Connector = ssh_connector
        self.host: str | None = None      # the host shown (also while its connection is down)
        self.dialog: Any = None
        self.watched: dict[str, dict[str, Any]] = {}    # per host: the runs watched there, by id
        self.connect_action = self.reconnect_action = self.disconnect_action = QAction()   # set by install
        self.download_action = QAction()
        self.task: workers.Task | None = None
        self.zoom: Any = None             # a remote report's timeline paged in as the user zooms
        self.label = QLabel("")
        self.label.setToolTip("the machine the window shows: its runs, history, reports and cleanup")
        self.label.hide()

    # -- connecting -----------------------------------------------------------------------------
    def ask(self) -> None:
        """File → Connect to host…: the dialog; it stays open with its progress bar until connected."""
        from gpuscope.app.remote.connect_dialog import QtConnectDialog

        self.dialog = dialog = QtConnectDialog(recent_hosts(self.settings), self.parent_widget)
        dialog.sigConnect.connect(lambda host: self.connect_to(host, reattach=True))
        dialog.finished.connect(lambda _code: setattr(self, "dialog", None))
        dialog.open()

    def connect_to(self, host: str, reattach: bool = False) -> None:
        """Connect to ``host`` off the GUI thread; ``reattach``: then follow the newest run still going
        there (or the run watched before a drop, ended since: its end)."""
        if self.task is not None:
            return
        if self.busy():
            self._failed("a run is in progress here: stop it before connecting to another host")
            return

        def work(task: workers.Task) -> RemoteCore:
            def progress(text: str, fraction: float | None = None) -> None:
                bridge.to_gui(self._progress, task, text, fraction)

            return RemoteCore(self.connector(host, progress), host)

        self.sigStatus.emit(f"connecting to {host}…")
        self.task = self.status.run_task(work, lambda core: self._connected(core, reattach),
                                         f"connecting to {host}", on_error=self._failed)

    def _progress(self, task: workers.Task, text: str, fraction: float | None) -> None:
        self.status.task_label.setText(text)
        if self.dialog is not None:
            self.dialog.progress(text, fraction)

    def _failed(self, text: str) -> None:
        self.task = None
        if self.dialog is not None:
            self.dialog.failed(text)
        self.sigError.emit(text)

    def _connected(self, core: RemoteCore, reattach: bool) -> None:
        self.task = None
        old = handle.remote()
        core.runs.update(self.watched.get(core.host, {}))   # what was received before is not sent again
        self.watched[core.host] = core.runs
        if old is not None:
            if old.alive:
                workers.submit(lambda task: old.close(), label="disconnect")
        handle.use(core)
        self.host = core.host
        push_host(self.settings, core.host)
        core.connection.on_closed(lambda reason: bridge.to_gui(self._dropped, core, reason))
        if self.dialog is not None:
            self.dialog.accept()
        self._show_host()
        self._refresh_views()
        where = core.hello.get("host") or core.host
        self.sigStatus.emit(f"connected to {core.host} ({where}, gpuscope {core.hello.get('version', '?')})")
        self.sigConnected.emit(core.host)
        if reattach:
            self._reattach(core)

    def _reattach(self, core: RemoteCore) -> None:
        session = self.session

        def work(task: workers.Task) -> Any:
            runs = core.active_runs()
            # a run watched before the drop that ended meanwhile: its folder answers the rest and its end
            runs = runs or [{"run_id": r.run_id, "run_dir": str(r.run_dir), "started_ns": r.started_ns}
                            for r in core.runs.values() if r.record is None]
            return core.reattach(runs[-1], session.run_bridge) if runs else None

        def done(run: Any) -> None:
            if run is None:
                self.sigStatus.emit(f"connected to {core.host}: no run is still going there")
                return
            session.controller.adopt(run)
            self.sigStatus.emit(f"re-attached to run {run.run_id} on {core.host}")
            self.sigReattached.emit(run.run_id)

        self.status.run_task(work, done, f"re-attaching to the runs on {core.host}")

    # -- dropping and leaving -------------------------------------------------------------------
    def _dropped(self, core: RemoteCore, reason: str) -> None:
        if handle.remote() is not core:
            return
        self._show_host(down=True)
        self.reconnect_action.setEnabled(True)
        self.sigError.emit(f"{reason}: the window keeps what it showed; File → Reconnect re-attaches")
        self.sigDropped.emit(reason)

    def reconnect(self) -> None:
        if self.host is not None:
            self.connect_to(self.host, reattach=True)

    def leave(self) -> None:
        """File → Disconnect: back to this machine; the remote's runs go on there (detached)."""
        core, host = handle.remote(), self.host
        if core is None or host is None:
            return
        handle.use(None)     # first: the connection's end is then no drop to report
        self.host = None
        workers.submit(lambda task: core.close(), label="disconnect")
        self._show_host()
        self._refresh_views()
        self.sigStatus.emit(f"disconnected from {host}: the window shows this machine")
        self.sigDisconnected.emit(host)

    # -- what the window shows ------------------------------------------------------------------
    def _show_host(self, down: bool = False) -> None:
        host = self.host
        self.sigTitle.emit(f"gpuscope — {host}" + (" (disconnected)" if down else "") if host else "gpuscope")
        self.label.setText(f"host: {host}" + (" (disconnected)" if down else "") if host else "")
        self.label.setStyleSheet("color: #b03a2e;" if down else "")
        self.label.setVisible(host is not None)
        self.disconnect_action.setEnabled(host is not None)
        self.download_action.setEnabled(host is not None and not down)
        self.reconnect_action.setEnabled(down)
        self.panel.python.setPlaceholderText(handle.run_python() or default_python())
        self.panel.script_edit.setPlaceholderText(
            f"a script on {host}: Browse… lists its folders" if host else "script.py: browse, drop a file, "
            "or pick a recent one")

    def _refresh_views(self) -> None:
        self.sigHostChanged.emit()

    def browse_script(self) -> None:
        """The launch panel's Browse…: the remote's folders when connected, else the local dialog."""
        core = handle.remote()
        if core is None:
            self.panel._pick_script()
            return
        from gpuscope.app.remote.browser import QtRemoteBrowser

        start = self.panel.script_edit.text().strip().rpartition("/")[0] or "~"
        dialog = QtRemoteBrowser(core, start, self.parent_widget)
        dialog.sigError.connect(self.sigError)
        if dialog.exec() and dialog.chosen:
            self.panel.set_script(dialog.chosen)


    # -- downloads ------------------------------------------------------------------------------
    def ask_download(self) -> None:
        """File → Download from host…: a remote file (a report, a trace), saved here with progress."""
        core = handle.remote()
        if core is None:
            return
        from PySide6.QtWidgets import QFileDialog

        from gpuscope.app.remote.browser import QtRemoteBrowser

        browser = QtRemoteBrowser(core, str(core.hello.get("data_dir") or "~") + "/runs", self.parent_widget,
                                  suffixes=None, title="Download a file")
        browser.sigError.connect(self.sigError)
        if not (browser.exec() and browser.chosen):
            return
        name = browser.chosen.rpartition("/")[2]
        dest, _ = QFileDialog.getSaveFileName(self.parent_widget, "Save as", str(Path.home() / name))
        if dest:
            self.download(browser.chosen, dest)

    def download(self, path: str, dest: str) -> workers.Task | None:
        """Copy ``path`` from the host to ``dest`` off the GUI thread (status bar: progress, Cancel;
        a copy cancelled or cut off resumes when asked again)."""
        core = handle.remote()
        if core is None:
            return None

        def work(task: workers.Task) -> str:
            def progress(done: int, size: int) -> None:
                task.progress(f"downloading {path.rpartition('/')[2]}: {done * 100 // max(size, 1)}% "
                              f"of {size / 1e6:,.1f} MB")

            return str(core.download(path, dest, progress, task.cancel_event))

        return self.status.run_task(work, lambda out: self.sigStatus.emit(f"downloaded {path} to {out}"),
                                    f"downloading {path}")


def install(window: Any) -> RemotePresenter:
    """File → Connect to host…, Disconnect and Reconnect in ``window`` (before Quit)."""
    p = RemotePresenter(window.settings, window.status, window.session, window.panel,
                        lambda: window.session.busy or window.compare.busy, window)
    window.statusBar().addPermanentWidget(p.label)
    p.sigStatus.connect(window.show_status)
    p.sigError.connect(window.show_error)
    p.sigTitle.connect(window.setWindowTitle)

    def host_changed() -> None:
        window.history.refresh()
        if window.tabs.currentWidget() is window.cleanup:
            window.cleanup.refresh()

    p.sigHostChanged.connect(host_changed)

    def report_shown(_report: Any) -> None:   # the Report tab exists now: its remote timelines page in
        if p.zoom is None:
            from gpuscope.app.remote.zoom import RemoteZoom

            p.zoom = RemoteZoom(window.report_view, p)

    window.reports.sigLoaded.connect(report_shown)
    menu = window.file_menu
    quit_action = next((a for a in menu.actions() if a.text().replace("&", "") == "Quit"), None)
    p.connect_action = menu.addAction("Connect to &host…", p.ask)
    p.reconnect_action = menu.addAction("&Reconnect", p.reconnect)
    p.disconnect_action = menu.addAction("&Disconnect", p.leave)
    p.download_action = menu.addAction("Do&wnload from host…", p.ask_download)
    if quit_action is not None:
        for action in (p.connect_action, p.reconnect_action, p.disconnect_action, p.download_action):
            menu.insertAction(quit_action, action)
        menu.insertSeparator(quit_action)
    p.reconnect_action.setEnabled(False)
    p.disconnect_action.setEnabled(False)
    p.download_action.setEnabled(False)
    browse = p.panel.browse_script
    browse.clicked.disconnect()
    browse.clicked.connect(p.browse_script)
    if CONNECT_AT_START:
        host = CONNECT_AT_START.pop()
        QTimer.singleShot(0, lambda: p.connect_to(host, reattach=True))
    return p
