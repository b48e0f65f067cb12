"""The Attached tab's widgets: the job's bar (what it is, what could not be read, Take stacks,
Profile 5 s, Detach), the run view's plots and findings strip, and below them the Processes,
Stacks and Profile tabs. Layout only; :class:`~gpuscope.app.attach.presenter.AttachPresenter`
fills them. The plots, process tree (with its Stop/Kill behind cleanup's checks) and stacks are
the Run tab's own widgets, over the attached job's :class:`~gpuscope.views.live_model.LiveModel`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from gpuscope.app.attach.qt_profile import QtProfile
from gpuscope.app.run.qt_live_view import QtLiveView
from gpuscope.app.run.qt_process_tree import QtProcessTree
from gpuscope.app.run.qt_stacks import QtStacks
from gpuscope.app.widgets.steady_tabs import SteadyTabs
from gpuscope.views.live_model import LiveModel


class AttachTab(QWidget):
    """``live``, ``tree``, ``stacks``, ``profile``, ``bottom`` (their tabs); ``state``, ``refused``;
    the buttons ``stacks_button``, ``profile_button``, ``detach_button``."""

    def __init__(self, model: LiveModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.state = QLabel("not attached")
        self.state.setTextFormat(Qt.TextFormat.PlainText)
        self.stacks_button = QPushButton("Take stacks now")
        self.stacks_button.setToolTip("the Python stack of every thread of every process of the job "
                                      "(py-spy, without pausing them)")
        self.profile_button = QPushButton("Profile 5 s")
        self.profile_button.setToolTip("sample every Python process of the job for 5 s")
        self.detach_button = QPushButton("Detach")
        self.detach_button.setToolTip("stop following the job (it goes on untouched) and keep what was seen "
                                      "as a run in History")
        bar = QHBoxLayout()
        bar.addWidget(self.state, 1)
        bar.addWidget(self.stacks_button)
        bar.addWidget(self.profile_button)
        bar.addWidget(self.detach_button)
        self.refused = QLabel()
        self.refused.setWordWrap(True)
        self.refused.setTextFormat(Qt.TextFormat.PlainText)
        self.refused.setStyleSheet("background: #fff4e0; border: 1px solid #e0b060; padding: 3px 6px;")
        self.refused.hide()
        self.live = QtLiveView(model)
        self.tree = QtProcessTree(model)
        self.stacks = QtStacks()
        self.profile = QtProfile()
        self.bottom = SteadyTabs()
        self.bottom.addTab(self.tree, "Processes")
        self.bottom.addTab(self.stacks, "Stacks")
        self.bottom.addTab(self.profile, "Profile")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.live)
        split.addWidget(self.bottom)
        split.setSizes([440, 320])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(self.refused)
        lay.addWidget(split, 1)
        self.set_attached(False)

    def set_attached(self, on: bool) -> None:
        """The actions that need a followed job."""
        for button in (self.stacks_button, self.profile_button, self.detach_button):
            button.setEnabled(on)
        self.stacks.set_can_take(on)
        self.profile.set_can_profile(on)

    def show_refused(self, lines: list[str]) -> None:
        self.refused.setText("Not everything could be read:\n" + "\n".join(lines) if lines else "")
        self.refused.setVisible(bool(lines))
