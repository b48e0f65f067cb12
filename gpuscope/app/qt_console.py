"""The run's console: stdout and stderr, bounded, batched, searchable.

Chunks arrive through the bridge and are appended once per GUI tick. The document keeps the
last ``max_lines`` lines (``QPlainTextEdit.setMaximumBlockCount``). One tick inserts at most
``per_tick`` lines, the newest; older lines of that tick are replaced by one "skipped" line. A
line costs ~40 µs once the document is full (Qt trims a block per new line), so 500 lines keep a
tick near 20 ms even when a script prints 100k lines a second, and the window stays responsive.
The full output is always in the run folder's stdout.log/stderr.log.

Lines stay whole: a stream's unfinished line (``print`` writes its arguments one by one when
output is unbuffered) waits for its end, at most one tick, so that another stream's line or a note
of gpuscope's is not inserted in the middle of it; a note always starts on a line of its own.
"""

from __future__ import annotations

import codecs

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton,
                               QVBoxLayout, QWidget)

MAX_LINES = 20_000
PER_TICK = 500


class QtConsole(QWidget):
    """Read-only output view with a find bar."""

    # the keys keyPressEvent handles, for Help → Keyboard shortcuts (gpuscope.app.qt_help)
    KEY_HELP_AREA = "console"
    KEY_HELP = (("Enter", "find the next match (in the find box)"), ("Shift+Enter", "find the previous match"))

    def __init__(self, max_lines: int = MAX_LINES, per_tick: int = PER_TICK, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.max_lines = max_lines
        self.per_tick = min(per_tick, max_lines)
        self.text = QPlainTextEdit(readOnly=True)
        self.text.setMaximumBlockCount(max_lines)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setUndoRedoEnabled(False)
        font = self.text.font()
        font.setFamily("monospace")
        font.setStyleHint(font.StyleHint.Monospace)
        self.text.setFont(font)
        self.find = QLineEdit(placeholderText="Find in output (Enter: next, Shift+Enter: previous)")
        self.find.setClearButtonEnabled(True)
        self.follow = QCheckBox("Follow", checked=True)
        self.status = QLabel()
        clear = QPushButton("Clear")
        clear.clicked.connect(self.clear)
        bar = QHBoxLayout()
        bar.addWidget(self.find, 1)
        bar.addWidget(self.status)
        bar.addWidget(self.follow)
        bar.addWidget(clear)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.text)
        self.find.returnPressed.connect(lambda: self.find_next(backward=False))
        self._formats = {"stdout": QTextCharFormat(), "stderr": QTextCharFormat(), "gpuscope": QTextCharFormat()}
        self._formats["stderr"].setForeground(QColor("#c0392b"))
        self._formats["gpuscope"].setForeground(QColor("#2471a3"))
        self.clear()

    def clear(self) -> None:
        self.text.clear()
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}
        self._partial = {"stdout": "", "stderr": ""}   # a line without its end yet, per stream
        self._held = {"stdout": False, "stderr": False}  # ... already held over one tick
        self._line_start = True
        self.lines_seen = 0
        self.lines_skipped = 0

    def append_chunks(self, chunks: list[tuple[str, bytes]], dropped_bytes: int = 0) -> None:
        """Append one tick's output (stream, bytes) in order; keep only what fits."""
        pieces: list[tuple[str, str]] = []
        if dropped_bytes:
            pieces.append(("gpuscope", f"[gpuscope: {dropped_bytes:,} bytes of output not shown here; "
                                       "all of it is in the run folder's stdout.log/stderr.log]\n"))
        for stream, chunk in chunks:
            text = self._partial[stream] + self._decoders[stream].decode(chunk)
            end = text.rfind("\n") + 1
            self._partial[stream] = text[end:]
            if end:
                self._held[stream] = False
                _add(pieces, stream, text[:end])
        for stream, rest in self._partial.items():
            if rest and self._held[stream]:   # no line end for a whole tick (a prompt, a progress bar)
                _add(pieces, stream, rest)
                self._partial[stream] = ""
            self._held[stream] = bool(self._partial[stream])
        self._insert(self._tail(pieces))

    def flush(self) -> None:
        """Show every unfinished line now (the run has ended)."""
        pieces: list[tuple[str, str]] = []
        for stream, rest in self._partial.items():
            if rest:
                _add(pieces, stream, rest)
            self._partial[stream], self._held[stream] = "", False
        self._insert(pieces)

    def append_text(self, text: str, stream: str = "gpuscope") -> None:
        self.flush()
        text = text if text.endswith("\n") else text + "\n"
        self._insert([(stream, text if self._line_start else "\n" + text)])

    def _tail(self, pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The last ``per_tick`` lines of a tick's pieces, after a note of how many were skipped."""
        budget = self.per_tick
        skipped = 0
        out: list[tuple[str, str]] = []
        for stream, text in reversed(pieces):
            n = text.count("\n")
            self.lines_seen += n
            if budget <= 0:
                skipped += n
                continue
            if n > budget:
                skipped += n - budget
                text = text[_nth_newline_from_end(text, budget) + 1:]
                n = budget
            out.append((stream, text))
            budget -= n
        if skipped:
            self.lines_skipped += skipped
            out.append(("gpuscope", f"[gpuscope: {skipped:,} lines skipped here (output flood); "
                                    "all of them are in the run folder's stdout.log/stderr.log]\n"))
        out.reverse()
        return out

    def _insert(self, pieces: list[tuple[str, str]]) -> None:
        if not pieces:
            return
        bar = self.text.verticalScrollBar()
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.beginEditBlock()
        for stream, text in pieces:
            cursor.insertText(text, self._formats[stream])
        cursor.endEditBlock()
        self._line_start = pieces[-1][1].endswith("\n")
        if self.follow.isChecked():
            bar.setValue(bar.maximum())

    def plain_text(self) -> str:
        return self.text.toPlainText()

    def find_next(self, backward: bool = False) -> bool:
        """Select the next match of the find box; wraps around once."""
        needle = self.find.text()
        if not needle:
            return False
        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        found = self.text.find(needle, flags)
        if not found:
            cursor = self.text.textCursor()
            cursor.movePosition(QTextCursor.MoveOperation.End if backward else QTextCursor.MoveOperation.Start)
            self.text.setTextCursor(cursor)
            found = self.text.find(needle, flags)
        if found:
            self.follow.setChecked(False)
        self.status.setText("" if found else "not found")
        return found

    def keyPressEvent(self, event) -> None:  # noqa: N802, ANN001 - Qt override: Shift+Enter = previous
        from PySide6.QtCore import Qt

        if self.find.hasFocus() and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and \
                event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.find_next(backward=True)
            return
        super().keyPressEvent(event)


def _add(pieces: list[tuple[str, str]], stream: str, text: str) -> None:
    """Append ``text`` of ``stream``, joining it to the last piece when that is the same stream's."""
    if pieces and pieces[-1][0] == stream:
        pieces[-1] = (stream, pieces[-1][1] + text)
    else:
        pieces.append((stream, text))


def _nth_newline_from_end(text: str, n: int) -> int:
    """Index of the newline that starts the last ``n`` lines (text ends with or without one)."""
    pos = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(n):
        pos = text.rfind("\n", 0, pos)
        if pos < 0:
            return -1
    return pos
