"""The Run tab's widgets: the launch panel (under a past run's bar), the live plots, and below them
the Processes, Console and Stacks tabs. Layout only; :class:`~gpuscope.app.run.session.RunSession`
fills them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QTabWidget, QVBoxLayout, QWidget

from gpuscope.app.run.qt_console import QtConsole
from gpuscope.app.run.qt_launch_panel import QtLaunchPanel
from gpuscope.app.run.qt_live_view import QtLiveView
from gpuscope.app.run.qt_process_tree import QtProcessTree
from gpuscope.app.run.qt_stacks import QtStacks
from gpuscope.app.widgets.steady_tabs import SteadyTabs, pane_color
from gpuscope.views.live_model import LiveModel


class RunTab(QSplitter):
    """``panel``, ``live``, ``tree``, ``console``, ``stacks`` and ``bottom`` (their tabs)."""

    def __init__(self, model: LiveModel, past_bar: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.panel = QtLaunchPanel()
        self.live = QtLiveView(model)
        self.tree = QtProcessTree(model)
        self.console = QtConsole()
        self.stacks = QtStacks()
        self.bottom = SteadyTabs()
        self.bottom.addTab(self.tree, "Processes")
        self.bottom.addTab(self.console, "Console")
        self.bottom.addTab(self.stacks, "Stacks")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.live)
        right.addWidget(self.bottom)
        right.setSizes([480, 280])
        left = QWidget()                  # a past run shown: its bar says the panel is the next run's
        left_lay = QVBoxLayout(left)
        left_lay.setContentsMargins(0, 0, 0, 0)
        left_lay.addWidget(past_bar)
        left_lay.addWidget(self.panel, 1)    # its fields scroll inside it; Run/Stop stay pinned below
        self.addWidget(left)
        self.addWidget(right)
        self.setCollapsible(0, False)
        self.setSizes([400, 880])       # a smaller window shrinks both, the panel to its minimum

    def paint_own_backgrounds(self, outer: QTabWidget) -> None:
        """The views whose text changes while a run runs (the clocks, the console's bar, the
        table's rows) paint their own background in their tabs' pane colour: Qt repaints a
        transparent widget's parents under it, and the tab widgets' style frames are costly."""
        for view, tabs in ((self.live, outer), (self.tree, self.bottom), (self.console, self.bottom),
                           (self.stacks, self.bottom)):
            palette = view.palette()
            palette.setColor(view.backgroundRole(), pane_color(tabs))
            view.setPalette(palette)
            view.setAutoFillBackground(True)
