"""Never freeze, never a traceback: cancellable long steps, the error hooks, Stop at any moment."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from apphelpers import fill, make_window, run_processes

from gpuscope.app.error_sink import install_hooks

pytestmark = pytest.mark.gui


def test_long_task_shows_progress_and_cancel_drops_its_result(qtbot):
    w = make_window(qtbot)
    results: list[object] = []
    saw_cancel = threading.Event()

    def slow(task):
        task.progress("step 1 of 2")
        deadline = time.monotonic() + 10
        while not task.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        saw_cancel.set()
        return "finished"

    task = w.run_task(slow, results.append, "slow step")
    assert w.progress.isVisibleTo(w) and w.cancel_button.isVisibleTo(w)
    qtbot.waitUntil(lambda: w.task_label.text() == "step 1 of 2", timeout=5_000)
    w.cancel_button.click()
    assert saw_cancel.wait(5) and task.cancelled
    assert not w.progress.isVisibleTo(w) and w.state_label.text() == "cancelled"
    qtbot.wait(200)
    assert results == []


def test_a_result_for_a_closed_view_is_dropped(qtbot):
    """A load that finishes after its widget was deleted (the window closed) is dropped: no
    'Internal C++ object already deleted' in the event loop."""
    from PySide6.QtWidgets import QLabel

    from gpuscope.app import workers

    make_window(qtbot)                # the GUI bridge the results travel through
    label = QLabel()
    release = threading.Event()
    task = workers.submit(lambda t: release.wait(10) and "late", on_done=label.setText, label="load")
    label.deleteLater()
    qtbot.waitUntil(lambda: not _valid(label), timeout=5_000)
    release.set()
    assert task.finished.wait(10)
    qtbot.wait(200)                 # the delivery ran on the GUI thread: nothing raised (pytest-qt fails on it)


def _valid(obj) -> bool:
    import shiboken6

    return shiboken6.isValid(obj)


def test_hooks_turn_exceptions_into_one_line_with_a_log(monkeypatch, gpuscope_home):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    lines: list[str] = []
    install_hooks(lines.append)
    try:
        raise ValueError("boom in a slot")
    except ValueError:
        sys.excepthook(*sys.exc_info())
    t = threading.Thread(target=lambda: 1 / 0, name="worker-x")
    t.start()
    t.join()
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert "ValueError: boom in a slot" in lines[0] and "thread worker-x" in lines[1]
    log = (gpuscope_home / "gpuscope-errors.log").read_text()
    assert "Traceback" in log and "ZeroDivisionError" in log and str(gpuscope_home) in lines[0]


def test_exception_in_a_worker_is_a_status_line(qtbot):
    w = make_window(qtbot)
    with qtbot.waitSignal(w.sigErrorShown, timeout=5_000) as blocker:
        w.run_task(lambda task: {}["missing"], lambda _r: None, "broken step")
    assert blocker.args[0].startswith("broken step: internal error: KeyError")
    assert "details in" in blocker.args[0] and not w.progress.isVisibleTo(w)


def test_stop_while_starting_leaves_no_process(qtbot, gpuscope_home):
    w = make_window(qtbot)
    fill(w, "sleepy_pool.py", "", "spawn")
    with qtbot.waitSignal(w.controller.sigEnded, timeout=30_000) as blocker:
        w.panel.run_button.click()
        w.panel.stop_button.click()          # before the run has even started
    assert blocker.args[0].status == "stopped"
    assert run_processes(gpuscope_home) == []
    # its report (if Python got far enough to log) or a status line, never a dialog
    qtbot.waitUntil(lambda: w.reports.idle and w._report_pending is None, timeout=30_000)
    assert w.last_error is None
