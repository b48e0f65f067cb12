"""The Python stacks of every thread of every process of a run, side by side, identical stacks once.

One card per group of identical stacks (:func:`gpuscope.findings.stacks.stack_groups`, the grouping
``gpuscope stacks`` prints): "2 pool workers · MainThread" with the pids and, where the most recent
frame tells, what they wait for ("waiting to acquire a lock": :func:`waiting_on`), then the frames, most
recent call first, as ``function  file:line``; the first frame in the user's code (outside
multiprocessing, threading and gpuscope's hook) is bold, with its source line under it; the
frames of gpuscope's own wrappers are grey. A process
the hook did not reach gets a card that says how it was read (py-spy, pystack) or why it was not
("neither py-spy nor pystack is installed").

The view only displays: the run session takes the stacks on a worker (``gpuscope.api.take_stacks``)
or loads those the findings recorder saved when the run looked stuck (``stacks/latest.json``).
"""

from __future__ import annotations

import html
import linecache
import os
import re
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QApplication, QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout,
                               QWidget)

from gpuscope.findings.stacks import ProcessStacks, StackGroup, stack_groups, user_frame

CARD_WIDTH = 330
MAX_FRAMES = 14
OWN_FRAMES = "/gpuscope/inject/"      # frames of gpuscope's hook (greyed)


# What a thread whose most recent Python frame is one of these is waiting for (file name, function).
WAITS = {
    ("threading.py", "wait"): "waiting on a threading Condition or Event",
    ("threading.py", "_wait_for_tstate_lock"): "waiting for a thread to end (join)",
    ("synchronize.py", "__enter__"): "waiting to acquire a multiprocessing lock",
    ("synchronize.py", "acquire"): "waiting to acquire a multiprocessing lock",
    ("connection.py", "_recv"): "waiting to read from a pipe",
    ("connection.py", "_recv_bytes"): "waiting to read from a pipe",
    ("connection.py", "poll"): "waiting for data on a pipe",
    ("connection.py", "wait"): "waiting for data on a pipe",
    ("queues.py", "get"): "waiting for an item of a multiprocessing queue",
    ("queue.py", "get"): "waiting for an item of a queue",
    ("popen_fork.py", "poll"): "waiting for a child process to end",
    ("popen_fork.py", "wait"): "waiting for a child process to end",
    ("selectors.py", "select"): "waiting in select()",
    ("resource_tracker.py", "main"): "the resource tracker, waiting for messages",
}
_SLEEP_LINE = re.compile(r"\bsleep\(")
_LOCK_LINE = re.compile(r"(\.acquire\(|^with\s+[\w.\[\]]*lock[\w.\[\]]*\s*(:|as\b))", re.IGNORECASE)


def waiting_on(thread) -> str:
    """A few words on what the thread waits for, from its most recent frame: a known blocking call
    of the standard library, or a line of the program that takes a lock (``with LOCK:``,
    ``lock.acquire()``) or sleeps; "" when the frames do not say."""
    if not thread.frames:
        return ""
    top = thread.frames[0]
    known = WAITS.get((os.path.basename(top.file), top.function))
    if known:
        return known
    line = source_line(top.file, top.line)
    if _LOCK_LINE.search(line):
        return "waiting to acquire a lock"
    return "sleeping" if _SLEEP_LINE.search(line) else ""


def source_line(file: str, line: int) -> str:
    return linecache.getline(file, line).strip() if os.path.isfile(file) else ""


def card_html(g: StackGroup) -> str:
    """A group's frames, most recent first; the user's frame bold with its source line."""
    thread = g.thread
    user = user_frame(thread)
    rows = []
    for f in thread.frames[:MAX_FRAMES]:
        place = f"{html.escape(os.path.basename(f.file))}:{f.line}"
        where = f"{html.escape(f.function)} <span style='color:#666'>{place}</span>"
        if f == user:
            src = source_line(f.file, f.line)
            rows.append(f"<b>{where}</b>" + (f"<br><code style='color:#444'>&nbsp;&nbsp;{html.escape(src)}</code>"
                                            if src else ""))
        elif OWN_FRAMES in f.file:       # gpuscope's injected wrappers: there, but not the program's
            rows.append(f"<span style='color:#aaa'>{html.escape(f.function)} {html.escape(os.path.basename(f.file))}:"
                        f"{f.line}</span>")
        else:
            rows.append(where)
    more = len(thread.frames) - MAX_FRAMES
    if more > 0:
        rows.append(f"<i>… {more} older frame(s)</i>")
    if not thread.frames:
        rows.append("<i>(no Python frame)</i>")
    return "<br>".join(rows)


class _Card(QFrame):
    def __init__(self, title: str, sub: str, body: str, parent: QWidget | None = None, muted: bool = False,
                 pids: tuple[int, ...] = ()) -> None:
        super().__init__(parent)
        self.setObjectName("stackCard")
        self.pids = pids
        self.muted = muted
        self.set_selected(False)
        self.setFixedWidth(CARD_WIDTH)
        self.title = QLabel(f"<b>{html.escape(title)}</b><br><span style='color:#555'>{html.escape(sub)}</span>", self)
        self.body = QLabel(body, self)
        for label in (self.title, self.body):
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.addWidget(self.title)
        lay.addWidget(self.body, 1)

    def set_selected(self, on: bool) -> None:
        """A selected card (Processes → Show stacks) has a thick blue border."""
        self.selected = on
        self.setStyleSheet("#stackCard { background: %s; border: %s; border-radius: 3px; }"
                           % ("#f3f3f3" if self.muted else "white", "2px solid #1f6fd1" if on else "1px solid #c8c8c8"))


class QtStacks(QWidget):
    """Cards of grouped stacks; ``show_stacks(processes, ...)``; "Take stacks now" asks the window."""

    sigTake = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.processes: list[ProcessStacks] = []
        self.groups: list[StackGroup] = []
        self.card_widgets: list[_Card] = []
        self.want_pid: int | None = None     # select this process's cards when stacks arrive
        self.head = QLabel("No stacks yet. They are taken when a run looks stuck, or with “Take stacks now”.", self)
        self.head.setWordWrap(True)
        self.head.setTextFormat(Qt.TextFormat.RichText)
        self.take_button = QPushButton("Take stacks now", self)
        self.take_button.setToolTip("the Python stack of every thread of every process of the running run")
        self.take_button.clicked.connect(self.sigTake.emit)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.clicked.connect(lambda: QApplication.clipboard().setText(self.text()))
        bar = QHBoxLayout()
        bar.addWidget(self.head, 1)
        bar.addWidget(self.take_button)
        bar.addWidget(self.copy_button)
        self.cards = QWidget()
        self.cards_layout = QHBoxLayout(self.cards)
        self.cards_layout.setContentsMargins(2, 2, 2, 2)
        self.cards_layout.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.cards_scroll = QScrollArea(self)
        self.cards_scroll.setWidgetResizable(True)
        self.cards_scroll.setWidget(self.cards)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(self.cards_scroll, 1)

    def set_busy(self, text: str) -> None:
        self.head.setText(html.escape(text))
        self.take_button.setEnabled(False)

    def set_can_take(self, live: bool) -> None:
        self.take_button.setEnabled(live)

    def clear(self) -> None:
        self.processes, self.groups = [], []
        self.want_pid = None
        self._fill([])
        self.head.setText("No stacks yet. They are taken when a run looks stuck, or with “Take stacks now”.")

    def show_stacks(self, processes: list[ProcessStacks], taken_ns: int | None = None, live: bool = True,
                    why: str = "") -> None:
        self.processes = list(processes)
        # the largest groups first; then threads the program named (MainThread, "lock-holder") before
        # the pool's and executor's own ("Thread-3 (_handle_results)")
        self.groups = sorted(stack_groups(self.processes),
                             key=lambda g: (-len(g.members), g.thread.name.startswith("Thread-")))
        when = time.strftime("%H:%M:%S", time.localtime(taken_ns / 1e9)) if taken_ns else "?"
        threads = sum(len(p.threads) for p in self.processes)
        state = "" if live else " (the run has ended: the last stacks taken)"
        self.head.setText(f"<b>Stacks of {len(self.processes)} process(es), {threads} thread(s)</b>, taken at "
                          f"{when}{html.escape(state)}" + (f" — {html.escape(why)}" if why else "")
                          + ". Identical stacks are shown once.")
        cards = []
        for g in self.groups:
            pids = ", ".join(str(p) for p in g.pids[:8]) + (" …" if len(g.pids) > 8 else "")
            wait = waiting_on(g.thread)
            cards.append(_Card(f"{g.who()} · {', '.join(g.names[:3])}", f"pid {pids}" + (f" — {wait}" if wait else ""),
                               card_html(g), pids=tuple(g.pids)))
        for p in self.processes:
            note = ((p.note or "").strip() or "no dump").splitlines()[0]     # a tool's error: its first line
            if not p.threads:
                cards.append(_Card(f"pid {p.pid} · {p.role}", "no stack", html.escape(note), muted=True,
                                   pids=(p.pid,)))
            elif p.source not in ("faulthandler", ""):
                cards.append(_Card(f"pid {p.pid} · {p.role}", f"read by {p.source}", html.escape(note), muted=True,
                                   pids=(p.pid,)))
        self._fill(cards)
        if self.want_pid is not None:
            self.select_pid(self.want_pid)

    def select_pid(self, pid: int) -> list[_Card]:
        """Mark the cards that hold ``pid``'s threads and scroll to the first; the cards selected."""
        self.want_pid = pid
        chosen = [c for c in self.card_widgets if pid in c.pids]
        for c in self.card_widgets:
            c.set_selected(c in chosen)
        if chosen:
            self.cards_scroll.ensureWidgetVisible(chosen[0])
        elif self.processes:
            self.head.setText(self.head.text() + html.escape(f" No stacks of pid {pid} (it has ended?)."))
        return chosen

    def _fill(self, cards: list[_Card]) -> None:
        while self.cards_layout.count():
            item = self.cards_layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.card_widgets = list(cards)
        for c in cards:
            self.cards_layout.addWidget(c, 0, Qt.AlignmentFlag.AlignTop)
        self.cards_layout.addStretch(1)

    def text(self) -> str:
        """The grouped lines, as ``gpuscope stacks`` prints them first."""
        from gpuscope.findings.stacks import group

        return "\n".join(group(self.processes))
