"""File → Connect to host…: the host ([USER@]HOST[:PORT], recent ones offered), a progress bar
while the agent is checked or installed there, and the one-line reason when it fails."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QLabel, QProgressBar, QVBoxLayout,
                               QWidget)

HINT = ("[user@]host[:port], as for ssh: your ~/.ssh/config, keys, agent and jump hosts are used. "
        "gpuscope installs its own version there when it is missing.")


class QtConnectDialog(QDialog):
    """Signals ``sigConnect(host)`` when Connect is pressed; the presenter answers with
    ``progress``, ``failed`` or ``accept``."""

    sigConnect = Signal(str)

    def __init__(self, recent: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to host")
        self.setMinimumWidth(520)
        self.host = QComboBox()
        self.host.setEditable(True)
        self.host.addItems(recent)
        self.host.setMinimumWidth(360)
        line = self.host.lineEdit()
        if line is not None:
            line.setPlaceholderText("user@gpu-server:22")
        hint = QLabel(HINT)
        hint.setWordWrap(True)
        self.state = QLabel("")
        self.state.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 100)
        self.bar.hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.connect_button = self.buttons.addButton("Connect", QDialogButtonBox.ButtonRole.AcceptRole)
        self.connect_button.setDefault(True)
        self.buttons.accepted.connect(self._connect)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in (QLabel("Host"), self.host, hint, self.bar, self.state, self.buttons):
            lay.addWidget(w)

    def _connect(self) -> None:
        text = self.host.currentText().strip()
        if not text:
            self.failed("type a host: [user@]host[:port]")
            return
        self.connect_button.setEnabled(False)
        self.bar.setRange(0, 0)
        self.bar.show()
        self.state.setStyleSheet("")
        self.state.setText(f"connecting to {text}…")
        self.sigConnect.emit(text)

    def progress(self, text: str, fraction: float | None) -> None:
        """A step of the connection (installing the agent: its fraction done, when known)."""
        self.state.setText(text)
        if fraction is None:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, 100)
            self.bar.setValue(int(fraction * 100))

    def failed(self, text: str) -> None:
        self.bar.hide()
        self.connect_button.setEnabled(True)
        self.state.setStyleSheet("color: #b03a2e;")
        self.state.setText(f"⚠ {text}")
