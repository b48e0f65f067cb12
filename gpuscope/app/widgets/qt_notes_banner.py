"""A strip above the live plots for what a run has to say at its end: each ``--annotate`` pattern
with the functions it matched and the calls recorded, and a pattern that matched nothing as a
warning with the closest names (the same lines as the CLI's notes and ``notes`` in ``--json``)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QWidget

WARN = "#fff4cc", "#e0c060"     # background, border: a pattern that matched nothing
INFO = "#eaf2fb", "#9db9d8"


def annotate_lines(notes: list[str]) -> list[str]:
    """The run's notes that report on --annotate patterns."""
    return [n for n in notes if n.startswith(("--annotate ", "warning: --annotate "))]


class NotesBanner(QFrame):
    """Hidden until a run ends with notes about its ``--annotate`` patterns."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("notesBanner")
        self.text = QLabel(self)
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(self.text, 1)
        self.lines: list[str] = []
        self.warning = False
        self.hide()

    def show_notes(self, notes: list[str]) -> None:
        self.lines = annotate_lines(notes)
        self.warning = any(n.startswith("warning:") for n in self.lines)
        if not self.lines:
            self.clear()
            return
        background, border = WARN if self.warning else INFO
        self.setStyleSheet(f"#notesBanner {{ background: {background}; border: 1px solid {border}; }}")
        rows = []
        for line in self.lines:
            text = html.escape(line.removeprefix("warning: "))
            rows.append(f"<b>⚠ {text}</b>" if line.startswith("warning:") else text)
        self.text.setText("<br>".join(rows))
        self.show()

    def clear(self) -> None:
        self.lines, self.warning = [], False
        self.text.setText("")
        self.hide()
