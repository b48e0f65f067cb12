"""The status bar: one message line, the elapsed time, and long steps with a busy bar and Cancel."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QSizePolicy, QStatusBar

from gpuscope.app import workers


class QtStatus:
    """Owns the widgets it adds to ``bar``; ``run_task`` starts work that shows in it."""

    def __init__(self, bar: QStatusBar, on_error: Callable[[str], None]) -> None:
        self.on_error = on_error
        self.tasks: dict[workers.Task, str] = {}
        self.state_label = QLabel("ready")
        # long messages must not widen the window: the full text is in the tooltip
        self.state_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.elapsed_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(160)
        self.progress.setTextVisible(False)
        self.progress.setRange(0, 0)          # the core's long steps give no fraction: a busy bar
        self.task_label = QLabel()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_tasks)
        bar.addWidget(self.state_label, 1)
        for w in (self.task_label, self.progress, self.cancel_button):
            bar.addPermanentWidget(w)
            w.hide()
        bar.addPermanentWidget(self.elapsed_label)

    def message(self, text: str, error: bool = False) -> None:
        self.state_label.setStyleSheet("color: #b03a2e;" if error else "")
        self.state_label.setText(f"⚠ {text}" if error else text)
        self.state_label.setToolTip(text)

    def run_task(self, fn: Callable[[workers.Task], Any], on_done: Callable[[Any], None], label: str,
                 on_error: Callable[[str], None] | None = None) -> workers.Task:
        """Run ``fn(task)`` off the GUI thread, with the busy bar and Cancel while it runs."""
        holder: dict[str, workers.Task] = {}

        def done(result: Any) -> None:
            self._end(holder["t"])
            on_done(result)

        def failed(text: str) -> None:
            self._end(holder["t"])
            (on_error or self.on_error)(text)

        holder["t"] = task = workers.submit(fn, on_done=done, on_error=failed, label=label,
                                            on_progress=self.task_label.setText)
        self.tasks[task] = label
        self._show()
        return task

    def end_task(self, task: workers.Task) -> None:
        self._end(task)

    def _end(self, task: workers.Task) -> None:
        self.tasks.pop(task, None)
        self._show()

    def _show(self) -> None:
        busy = bool(self.tasks)
        self.task_label.setText(", ".join(self.tasks.values()) + "…" if busy else "")
        for w in (self.task_label, self.progress, self.cancel_button):
            w.setVisible(busy)

    def cancel_tasks(self) -> None:
        """Stop waiting for every long step; their results are dropped."""
        had = bool(self.tasks)
        for task in list(self.tasks):
            task.cancel()
        self.tasks.clear()
        self._show()
        if had:
            self.message("cancelled")
