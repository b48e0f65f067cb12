"""The run's console: stdout and stderr, bounded, paced, searchable.

The GUI thread never waits on output. Chunks arrive through the bridge (with their line counts,
counted on the output threads) and wait in a queue; the console takes from it what it can show
in a frame: batches of at most ``per_tick`` lines (fewer when inserting is slow: the batch size
follows the measured cost per line so that a batch takes about ``BATCH_S``), until ``BUDGET_S``
of the frame is spent; the rest waits for the next frame (``FRAME_MS``, the console's own timer,
running only while something waits). The queue never holds more than ``LAG_BATCHES`` batches:
when a program prints faster than that, the oldest waiting lines are skipped, never decoded nor
laid out, and one line says how many ("N lines skipped here (output flood)") and where all of
them are: the run folder's ``stdout.log`` / ``stderr.log``. The document keeps the last
``max_lines`` lines (``QPlainTextEdit.setMaximumBlockCount``, no wrapping, no HTML), and the bar
says so once lines have left the view.

Lines stay whole: a stream's unfinished line (``print`` writes its arguments one by one when
output is unbuffered) waits for its end, at most one tick (one ``append_chunks`` call, or
``HOLD_S`` when no output comes), so that another stream's line or a note of gpuscope's is not
inserted in the middle of it; a note always starts on a line of its own, after everything that
arrived before it. After a skip a stream resumes at the start of a line. A carriage return starts
its line again, as in a terminal (a progress bar updates in place instead of growing one line),
and a line longer than ``MAX_LINE_CHARS`` is shown cut (laying out a 1 MB line takes ~0.4 s).
"""

from __future__ import annotations

import codecs
import time
from collections import deque
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer, QUrl
from PySide6.QtGui import QColor, QDesktopServices, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton,
                               QVBoxLayout, QWidget)

MAX_LINES = 20_000      # the scrollback
PER_TICK = 500          # the most lines one insert puts in the document
FRAME_MS = 40           # the console's own pace while output waits
BUDGET_S = 0.004        # GUI-thread time one frame may spend on output
BATCH_S = 0.002         # ... one batch (the batch size follows the measured cost per line)
LAG_BATCHES = 8         # waiting lines beyond this many batches are skipped (the newest are kept)
FLUSH_BATCHES = 4       # a note or the run's end catches up at once: the newest batches are shown
HOLD_S = 0.1            # an unfinished line is shown after this long without its end
MAX_LINE_CHARS = 10_000  # longer lines are shown cut (a 1 MB line costs ~0.4 s per insert and paint)
MIN_BATCH = 20
CUT_NOTE = " … [gpuscope: line cut here; all of it is in the run folder's log]"
STREAMS = ("stdout", "stderr")


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
        self.search = QLineEdit()
        self.search.setPlaceholderText("Find in output (Enter: next, Shift+Enter: previous)")
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(110)
        self.follow = QCheckBox("Follow")
        self.follow.setChecked(True)
        self.follow.setToolTip("Keep the newest output in view (a search turns it off; every run starts with it on)")
        self.follow.toggled.connect(self._follow_toggled)
        # The document lays out lazily: its height (the bar's range) can grow after an insert has
        # scrolled to the end, leaving the view a line short. Following keeps it at the end.
        self.text.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self.status = QLabel()
        self.kept = QLabel()          # "last 20,000 of 1,000,000 lines · all in run folder" (a link)
        self.kept.setOpenExternalLinks(False)
        self.kept.setMinimumWidth(1)      # shrinks (clipped, the tooltip has it all) before the window grows
        self.kept.linkActivated.connect(lambda url: QDesktopServices.openUrl(QUrl(url)))
        clear = QPushButton("Clear")
        clear.clicked.connect(self.clear)
        bar = QHBoxLayout()
        bar.addWidget(self.search, 1)
        bar.addWidget(self.status)
        bar.addWidget(self.kept)
        bar.addWidget(self.follow)
        bar.addWidget(clear)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.text)
        self.search.returnPressed.connect(lambda: self.find_next(backward=False))
        self._formats = {"stdout": QTextCharFormat(), "stderr": QTextCharFormat(), "gpuscope": QTextCharFormat()}
        self._formats["stderr"].setForeground(QColor("#c0392b"))
        self._formats["gpuscope"].setForeground(QColor("#2471a3"))
        self._timer = QTimer(self, interval=FRAME_MS)
        self._timer.timeout.connect(self._frame)
        self.log_folder: Path | None = None
        self.allow = self.per_tick          # lines per batch, from the measured cost per line
        self._cost = BATCH_S / self.per_tick
        self.clear()

    # -- state ------------------------------------------------------------------------------------
    def clear(self) -> None:
        """Empty the view and everything waiting; Follow on (each run starts following)."""
        self.text.clear()
        self._queue: deque[tuple[Any, ...]] = deque()   # ("out", stream, bytes, lines) | ("gap", ...) | ("tick",)
        self._queued_lines = 0
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in STREAMS}
        self._partial = {s: "" for s in STREAMS}      # a line without its end yet, per stream
        self._held = {s: False for s in STREAMS}      # ... already held over one tick
        self._resume = {s: False for s in STREAMS}    # after a skip in mid-line: drop up to the next line end
        self._skipped_now = 0                          # lines skipped since the last note of it
        self._last_tick = self._kept_at = time.monotonic()
        self._pumped = 0.0
        self._line_start = True
        self._cr = False                               # a carriage return waits for its line's new text
        self.lines_seen = 0
        self.lines_skipped = 0
        self._timer.stop()
        self.follow.setChecked(True)
        self._show_kept()

    def set_log_folder(self, folder: str | Path | None) -> None:
        """The run folder whose stdout.log/stderr.log hold all the output (named in skip notes)."""
        self.log_folder = Path(folder) if folder else None
        self._show_kept()

    # -- output in --------------------------------------------------------------------------------
    def append_chunks(self, chunks: list[Any], dropped: dict[str, tuple[int, int, bool]] | None = None) -> None:
        """Queue one tick's output, in order, and show what fits in this frame.

        ``chunks``: (stream, bytes) or (stream, bytes, line count) as the bridge gives them;
        ``dropped``: what the bridge left out before them, {stream: (bytes, lines, ends in mid-line)}."""
        for stream, (nbytes, lines, mid_line) in (dropped or {}).items():
            self._queue.append(("gap", stream, nbytes, lines, mid_line))
            self.lines_seen += lines
        for chunk in chunks:
            stream, data = chunk[0], chunk[1]
            lines = chunk[2] if len(chunk) > 2 else data.count(b"\n")
            if data:
                self._queue.append(("out", stream, data, lines))
                self._queued_lines += lines
                self.lines_seen += lines
        self._tick()
        self._pump()

    def append_text(self, text: str, stream: str = "gpuscope") -> None:
        """A note of gpuscope's: after everything that arrived before it, on a line of its own."""
        self.flush()
        text = text if text.endswith("\n") else text + "\n"
        self._insert([(stream, text if self._line_start else "\n" + text)])

    def flush(self) -> None:
        """Catch up now (a note, the run's end): the newest waiting lines are shown, older ones
        skipped, and every unfinished line is shown."""
        self._trim(FLUSH_BATCHES * self.allow)
        while self._queue:
            self._batch()
        pieces: list[list[Any]] = []
        for stream in STREAMS:
            self._release(pieces, stream)
        self._insert(_joined(pieces))
        self._schedule()
        self._show_kept()

    def pending_lines(self) -> int:
        """Lines waiting to be shown."""
        return self._queued_lines

    # -- pacing -----------------------------------------------------------------------------------
    def _tick(self) -> None:
        self._queue.append(("tick",))
        self._last_tick = time.monotonic()

    def _frame(self) -> None:
        if time.perf_counter() - self._pumped < FRAME_MS / 2000:
            return             # append_chunks (the window's tick) has just taken this frame's share
        if not self._queue and any(self._partial.values()) and time.monotonic() - self._last_tick >= HOLD_S:
            self._tick()       # no output for a while: an unfinished line (a prompt) is shown
        self._pump()

    def _schedule(self) -> None:
        if self._queue or any(self._partial.values()):
            if not self._timer.isActive():
                self._timer.start()
        else:
            self._timer.stop()

    def _pump(self) -> None:
        """Batches until the frame's budget is spent; too much waiting: the oldest lines skipped."""
        start = self._pumped = time.perf_counter()
        self._trim(LAG_BATCHES * self.allow)
        while self._queue:
            self._batch()
            if time.perf_counter() - start >= BUDGET_S:
                break
        self._schedule()
        self._show_kept(now=not self._queue)

    def _batch(self) -> None:
        t0 = time.perf_counter()
        pieces, lines = self._take(max(1, self.allow - 2))   # room for a skip note and its line break
        self._insert(pieces)
        if lines >= MIN_BATCH:      # learn the cost per line (it grows once the scrollback is full)
            self._cost = 0.7 * self._cost + 0.3 * (time.perf_counter() - t0) / lines
            self.allow = min(self.per_tick, max(MIN_BATCH, int(BATCH_S / self._cost)))

    def _trim(self, keep: int) -> None:
        """Skip the oldest waiting lines so that at most ``keep`` wait (never decoded)."""
        excess = self._queued_lines - keep
        if excess <= 0:
            return
        queue = self._queue
        skipped: dict[str, list[Any]] = {}           # stream: [lines, ends in mid-line]
        while excess > 0 and queue:
            item = queue.popleft()
            if item[0] == "gap":
                seen = skipped.setdefault(item[1], [0, False])
                seen[0] += item[3]
                seen[1] = item[4]
            elif item[0] == "out":   # (ticks among skipped output: nothing left to hold)
                _, stream, data, lines = item
                seen = skipped.setdefault(stream, [0, False])
                if lines <= excess:
                    self._queued_lines -= lines
                    excess -= lines
                    seen[0] += lines
                    seen[1] = not data.endswith(b"\n")
                else:      # the chunk's last (lines - excess) lines stay
                    cut = _start_of_last(data, lines - excess)
                    self._queued_lines -= excess
                    seen[0] += excess
                    seen[1] = False
                    queue.appendleft(("out", stream, data[cut:], lines - excess))
                    excess = 0
        for stream, (lines, mid_line) in skipped.items():
            self._gap(stream, lines, mid_line)

    def _gap(self, stream: str, lines: int, mid_line: bool) -> None:
        """Output of ``stream`` left out here: its unfinished line goes with it (the end of that
        line is among the ``lines`` left out)."""
        self._skipped_now += lines
        self._partial[stream], self._held[stream] = "", False
        self._decoders[stream].reset()
        self._resume[stream] = mid_line

    def _take(self, limit: int) -> tuple[list[tuple[str, str]], int]:
        """Up to ``limit`` lines from the queue's front, as (stream, text) pieces in order."""
        pieces: list[list[Any]] = []
        taken = 0
        queue = self._queue
        while queue and taken < limit:
            item = queue[0]
            kind = item[0]
            if kind == "tick":       # unfinished lines held over a whole tick are shown now
                queue.popleft()
                for stream in STREAMS:
                    if self._held[stream]:
                        self._release(pieces, stream)
                    self._held[stream] = bool(self._partial[stream])
                continue
            if kind == "gap":
                queue.popleft()
                self._gap(item[1], item[3], item[4])
                continue
            _, stream, data, lines = item
            room = limit - taken
            if lines > room:         # the first ``room`` lines now, the rest stays in front
                cut = _nth_newline(data, room) + 1
                queue[0] = ("out", stream, data[cut:], lines - room)
                data, lines = data[:cut], room
            else:
                queue.popleft()
            self._queued_lines -= lines
            taken += lines
            if self._skipped_now:
                self._note_skipped(pieces)
            if self._resume[stream]:  # the rest of a line whose start was skipped
                end = data.find(b"\n")
                if end < 0:
                    continue
                data = data[end + 1:]
                self._resume[stream] = False
            text = self._partial[stream] + self._decoders[stream].decode(data)
            end = text.rfind("\n") + 1
            self._partial[stream] = text[end:]
            if end:
                self._held[stream] = False
                _add(pieces, stream, text[:end])
        if self._skipped_now and not queue:
            self._note_skipped(pieces)
        return _joined(pieces), taken

    def _release(self, pieces: list[list[Any]], stream: str) -> None:
        if self._partial[stream]:
            _add(pieces, stream, self._partial[stream])
            self._partial[stream] = ""
        self._held[stream] = False

    def _note_skipped(self, pieces: list[list[Any]]) -> None:
        n, self._skipped_now = self._skipped_now, 0
        self.lines_skipped += n
        where = (f"{self.log_folder / 'stdout.log'} and stderr.log" if self.log_folder
                 else "the run folder's stdout.log/stderr.log")
        at_start = pieces[-1][1][-1].endswith("\n") if pieces else self._line_start
        _add(pieces, "gpuscope", ("" if at_start else "\n") +
             f"[gpuscope: {n:,} lines skipped here (output flood); all of them are in {where}]\n")

    def _insert(self, pieces: list[tuple[str, str]]) -> None:
        if not pieces:
            return
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.beginEditBlock()
        for stream, text in pieces:
            fmt = self._formats[stream]
            if "\r" not in text and not self._cr:
                cursor.insertText(_cut_long(text, cursor.positionInBlock()), fmt)
                continue
            # a carriage return (a progress bar) starts its line again, as in a terminal
            for k, seg in enumerate(text.split("\r")):
                if k:
                    self._cr = True
                if not seg:
                    continue
                if self._cr and not seg.startswith("\n"):
                    cursor.movePosition(QTextCursor.MoveOperation.StartOfBlock, QTextCursor.MoveMode.KeepAnchor)
                self._cr = False
                cursor.insertText(_cut_long(seg, cursor.positionInBlock()), fmt)
        cursor.endEditBlock()
        self._line_start = pieces[-1][1].endswith("\n")
        if self.follow.isChecked():
            self._to_end()

    def _to_end(self) -> None:
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _range_changed(self, _low: int, high: int) -> None:
        if self.follow.isChecked():
            self.text.verticalScrollBar().setValue(high)

    def _follow_toggled(self, on: bool) -> None:
        if on:
            self._to_end()

    def _show_kept(self, now: bool = True) -> None:
        """Once lines have left the view (scrollback full, or skipped): how many, and where they all are."""
        if self.lines_seen <= self.max_lines and not self.lines_skipped:
            if self.kept.text():
                self.kept.clear()
            return
        if not now and time.monotonic() - self._kept_at < 0.5:    # a label's relayout: twice a second
            return
        self._kept_at = time.monotonic()
        shown = min(self.text.document().blockCount(), self.lines_seen)
        text = f"{shown:,} of {self.lines_seen:,} lines"
        if self.log_folder is not None:
            text += f' · all in <a href="{QUrl.fromLocalFile(str(self.log_folder)).toString()}">run folder</a>'
        else:
            text += " · all in run folder"
        if text != self.kept.text():
            self.kept.setText(text)
            self.kept.setToolTip("The console keeps the last lines only; every line the program printed is in "
                                 + (f"{self.log_folder}/stdout.log and stderr.log" if self.log_folder
                                    else "the run folder's stdout.log and stderr.log")
                                 + " (each capped at GPUSCOPE_OUTPUT_CAP_MB, 64 MB by default: first and last halves)")

    # -- reading ----------------------------------------------------------------------------------
    def plain_text(self) -> str:
        return self.text.toPlainText()

    def find_next(self, backward: bool = False) -> bool:
        """Select the next match of the find box; wraps around once. A match turns Follow off."""
        needle = self.search.text()
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

    def keyPressEvent(self, event) -> None:
        from PySide6.QtCore import Qt

        if self.search.hasFocus() and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and \
                event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.find_next(backward=True)
            return
        super().keyPressEvent(event)


def _add(pieces: list[list[Any]], stream: str, text: str) -> None:
    """Append ``text`` of ``stream`` to the last piece when that is the same stream's (a list of
    texts, joined once: no quadratic string growth)."""
    if pieces and pieces[-1][0] == stream:
        pieces[-1][1].append(text)
    else:
        pieces.append([stream, [text]])


def _cut_long(text: str, column: int) -> str:
    """``text`` with each line cut at ``MAX_LINE_CHARS`` (the first continues a line at ``column``)."""
    if column + len(text) <= MAX_LINE_CHARS:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        room = MAX_LINE_CHARS - (column if i == 0 else 0)
        if len(line) > room:
            lines[i] = line[:room] + CUT_NOTE if room > 0 else ""
    return "\n".join(lines)


def _joined(pieces: list[list[Any]]) -> list[tuple[str, str]]:
    return [(stream, "".join(texts)) for stream, texts in pieces]


def _nth_newline(data: bytes, n: int) -> int:
    """Index of the ``n``-th newline of ``data`` (n >= 1; it has at least n)."""
    pos = -1
    for _ in range(n):
        pos = data.find(b"\n", pos + 1)
    return pos


def _start_of_last(data: bytes, n: int) -> int:
    """Where the part of ``data`` holding its last ``n`` newlines (and what follows them) starts:
    just after the newline before them (0: there is none)."""
    pos = len(data)
    for _ in range(n + 1):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            return 0
    return pos + 1
