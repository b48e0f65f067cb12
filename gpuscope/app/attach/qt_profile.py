"""The "Profile 5 s" tab of an attached job: the top functions per role and a flame graph of the
samples (py-spy ``record --subprocesses``, kept as speedscope JSON in the attached run's folder)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QComboBox, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QScrollArea, QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from gpuscope.app.attach.qt_flame import QtFlame
from gpuscope.views import attach_flame
from gpuscope.views.attach_picker import profile_line, top_rows

if TYPE_CHECKING:
    from gpuscope.attach.profile import Profile

TOP_COLUMNS = ("Role", "Function", "Where", "Samples", "Share")


class QtProfile(QWidget):
    """``set_profile(profile, roles)``; "Profile 5 s" asks the presenter (``sigProfile(seconds)``)."""

    sigProfile = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.profile: Profile | None = None
        self.samples = attach_flame.Samples([], [])
        self.roles: dict[int, str] = {}
        self.head = QLabel("No profile yet. “Profile 5 s” samples every Python process of the job for 5 s "
                           "(py-spy, without pausing them).")
        self.head.setWordWrap(True)
        self.profile_button = QPushButton("Profile 5 s")
        self.profile_button.setToolTip("sample every Python process of the job for 5 s: top functions per role "
                                       "and a flame graph")
        self.profile_button.clicked.connect(lambda: self.sigProfile.emit(5.0))
        self.copy_button = QPushButton("Copy path")
        self.copy_button.setToolTip("the speedscope file (opens in speedscope.app)")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self._copy_path)
        self.group = QComboBox()
        self.group.addItem("by role", "role")
        self.group.addItem("by process", "pid")
        self.group.currentIndexChanged.connect(lambda _i: self._draw())
        bar = QHBoxLayout()
        bar.addWidget(self.head, 1)
        bar.addWidget(QLabel("flame graph"))
        bar.addWidget(self.group)
        bar.addWidget(self.profile_button)
        bar.addWidget(self.copy_button)
        self.table = QTableWidget(0, len(TOP_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(TOP_COLUMNS))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.flame = QtFlame()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.flame)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(scroll)
        split.setSizes([420, 640])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(split, 1)

    def set_busy(self, seconds: float) -> None:
        self.head.setText(f"sampling every Python process of the job for {seconds:g} s…")
        self.profile_button.setEnabled(False)

    def set_can_profile(self, on: bool) -> None:
        self.profile_button.setEnabled(on)

    def set_profile(self, profile: Profile, roles: dict[int, str]) -> None:
        """Show a profile: ``roles`` (pid -> role) names its processes."""
        self.profile, self.roles = profile, dict(roles)
        self.samples = attach_flame.load(profile.path) if profile.samples else attach_flame.Samples([], [])
        self.head.setText(f"<b>CPU profile</b>: {html.escape(profile_line(profile))}")
        self.copy_button.setEnabled(bool(profile.samples))
        rows = top_rows(profile)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = (row.role, row.function, row.where, f"{row.samples:,}", f"{100 * row.share:.0f} %")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)
        self._draw()

    def _draw(self) -> None:
        by_role = self.group.currentData() == "role"
        label = {p.pid: (self.roles.get(p.pid, "process") if by_role
                         else f"pid {p.pid} · {self.roles.get(p.pid, 'process')}") for p in self.samples.processes}
        self.flame.set_boxes(attach_flame.layout(self.samples, label, min_width=0.0005), self.samples.total)

    def _copy_path(self) -> None:
        if self.profile is not None:
            QApplication.clipboard().setText(self.profile.path)
