"""Helpers for the app tests (no fixtures here: conftest.py stays minimal)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QListView, QMessageBox

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def script(name: str) -> str:
    return str(SCRIPTS / name)


def processes_with_env(marker: bytes) -> list[int]:
    """Live processes whose environment holds ``marker`` (this test's GPUSCOPE_HOME)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in env.split(b"\0") and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def make_window(qtbot: Any) -> Any:
    from gpuscope.app.qt_main_window import MainWindow

    window = MainWindow()
    window.show_dialogs = False
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    return window


def wait_report(qtbot: Any, window: Any, timeout: int = 30_000) -> None:
    """Until the report of the last run is loaded and shown (signals may have fired already)."""
    qtbot.waitUntil(lambda: window.last_report is not None and window._report_pending is None, timeout=timeout)


def fill(window: Any, name: str, args: str = "", method: str = "spawn") -> None:
    panel = window.panel
    panel.set_script(script(name))
    panel.args.setText(args)
    panel.method.setCurrentIndex(panel.method.findData(method))


def start_torchrun(qtbot: Any, window: Any, nproc: int = 2) -> None:
    """Fill the panel with the tiny gloo DDP script under torchrun and press Run; returns once started."""
    fill(window, "ddp_tiny.py", "", "default")
    window.panel.launcher.setCurrentText("torchrun")
    window.panel.nproc.setValue(nproc)
    with qtbot.waitSignal(window.controller.sigStarted, timeout=60_000):
        window.panel.run_button.click()


def run_processes(gpuscope_home: Path) -> list[int]:
    """Live processes started by this test's runs (their environment names its GPUSCOPE_HOME)."""
    return processes_with_env(f"GPUSCOPE_HOME={gpuscope_home}".encode())


def table_counts(view: Any) -> list[dict[str, int]]:
    """One {name: count} per item view under ``view`` that has "Count" and "Name" columns."""
    tables: list[dict[str, int]] = []
    for item_view in view.findChildren(QAbstractItemView):
        model = item_view.model()
        if model is None or isinstance(item_view, QListView):    # lists (findings) have no columns
            continue
        heads = {str(model.headerData(c, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)).strip().lower(): c
                 for c in range(model.columnCount())}
        if "count" not in heads or "name" not in heads:
            continue
        out: dict[str, int] = {}
        tables.append(out)
        for r in range(model.rowCount()):
            name = model.data(model.index(r, heads["name"]))
            count = str(model.data(model.index(r, heads["count"])) or "").replace(",", "")
            if name is not None and count.isdigit():
                out[str(name)] = out.get(str(name), 0) + int(count)
    return tables


os.environ.setdefault("GPUSCOPE_TESTS", "1")


def start_nsys_run(qtbot: Any, window: Any, while_running: Any = None, timeout: int = 400_000) -> Any:
    """Press Run (nsys ticked) and wait for the run's end; ``while_running(window)`` is a condition
    to see while it runs. Pressed again once, and said (tests/flaky.py), only when nsys failed on
    its own as it does without gpuscope (a lost agent); any other failure is the test's to judge."""
    from tests.app.timeline_support import _nsys_output
    from tests.flaky import known_flake, note_retry

    for attempt in (1, 2):
        window.session.last_result = None
        # one nsys recording at a time on a machine (gpuscope/nsys/lock.py): the run waits for the lock
        with qtbot.waitSignal(window.controller.sigStarted, timeout=600_000):
            window.panel.run_button.click()
        seen = {"ok": while_running is None}

        def ended(seen: dict[str, bool] = seen) -> bool:
            if not seen["ok"] and window.last_result is None:
                seen["ok"] = bool(while_running(window))
            return window.last_result is not None

        qtbot.waitUntil(ended, timeout=timeout)
        result = window.last_result
        flake = None if result.status == "exited" else known_flake(_nsys_output(Path(result.run_dir))
                                                                   + str(result.error or ""))
        if flake and attempt == 1:
            note_retry("an nsys run through the window (attempt 1)", flake)
            continue
        assert seen["ok"], "not seen while the run ran"
        return result
    raise AssertionError("unreachable")


def confirm_cleanup(qtbot: Any, view: Any, accept: bool = True, timeout: int = 60_000) -> QMessageBox:
    """Press the Cleanup tab's "Clean up selected…" and answer its dialog; with ``accept``, wait for
    the clean-up to end. The box comes back with ``text_shown``: the question it asked."""
    qtbot.mouseClick(view.clean_button, Qt.LeftButton)
    box = view.confirm_box
    assert box is not None and box.isVisible()
    wanted = QMessageBox.AcceptRole if accept else QMessageBox.RejectRole
    button = next(b for b in box.buttons() if box.buttonRole(b) == wanted)
    text = box.text() + "\n" + box.informativeText()
    if accept:
        with qtbot.waitSignal(view.sigCleaned, timeout=timeout):
            qtbot.mouseClick(button, Qt.LeftButton)
    else:
        qtbot.mouseClick(button, Qt.LeftButton)
    box.text_shown = text
    return box
