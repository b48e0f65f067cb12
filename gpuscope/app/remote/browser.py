"""The launch panel's Browse… on a remote host: its folders, listed by the agent (``list_dir``)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QLabel, QListWidget, QListWidgetItem, QVBoxLayout,
                               QWidget)

from gpuscope.errors import UserError


class QtRemoteBrowser(QDialog):
    """A remote file picker: double-click a folder to open it, a file (or OK) to choose it.
    Listings are one request each, asked on the GUI thread: a folder is a few hundred bytes."""

    sigError = Signal(str)

    def __init__(self, core: Any, start: str, parent: QWidget | None = None,
                 suffixes: tuple[str, ...] | None = (".py",), title: str = "Choose a script") -> None:
        super().__init__(parent)
        self.core = core
        self.suffixes = suffixes     # the files listed (None: every file)
        self.path = ""
        self.chosen = ""
        self.setWindowTitle(f"{title} on {core.host}")
        self.where = QLabel("")
        self.list = QListWidget()
        self.list.itemActivated.connect(self._activated)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._ok)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in (self.where, self.list, buttons):
            lay.addWidget(w)
        self.resize(520, 420)
        if not self.open_folder(start):
            self.open_folder("~")

    def open_folder(self, path: str) -> bool:
        try:
            self.path, entries = self.core.list_dir(path)
        except UserError as exc:
            self.sigError.emit(str(exc))
            return False
        self.where.setText(f"{self.core.host}:{self.path}")
        self.list.clear()
        self.list.addItem(self._item("..", True))
        for e in entries:
            if e.get("dir") or self.suffixes is None or str(e.get("name", "")).endswith(self.suffixes):
                self.list.addItem(self._item(str(e["name"]), bool(e.get("dir"))))
        return True

    @staticmethod
    def _item(name: str, is_dir: bool) -> QListWidgetItem:
        item = QListWidgetItem(name + ("/" if is_dir and name != ".." else ""))
        item.setData(Qt.ItemDataRole.UserRole, (name, is_dir))
        return item

    def _activated(self, item: QListWidgetItem) -> None:
        name, is_dir = item.data(Qt.ItemDataRole.UserRole)
        target = self.path.rstrip("/").rpartition("/")[0] or "/" if name == ".." else f"{self.path.rstrip('/')}/{name}"
        if is_dir:
            self.open_folder(target)
        else:
            self.chosen = target
            self.accept()

    def _ok(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self._activated(item)
