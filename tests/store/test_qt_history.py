"""The History tab: disk use per run and in all, deleting the selected runs after a confirmation,
and the note when the store was rebuilt (Qt offscreen, real runs and store)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import sqlite3  # noqa: E402
from contextlib import closing  # noqa: E402
import tempfile
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from gpuscope.store.retention import disk_usage, human  # noqa: E402
from tests.store.util import damage_bytes, damaged_copies, store_of  # noqa: E402

pytestmark = pytest.mark.gui
SHOTS = Path(tempfile.gettempdir()) / "gpuscope-test-shots"   # docs/screenshots: scripts/screenshots.py only


@pytest.fixture
def history(qtbot, two_runs):
    from gpuscope.app import workers
    from gpuscope.app.history.qt_history import QtHistory

    w = QtHistory()
    qtbot.addWidget(w)
    w.resize(1100, 260)
    w.show()
    yield w
    workers.wait_all(15_000)


def _load(qtbot, w) -> None:
    with qtbot.waitSignal(w.sigLoaded, timeout=60_000):
        w.refresh()


def _select_all(w) -> None:
    from PySide6.QtCore import QItemSelectionModel

    model = w.table.selectionModel()
    for r in range(w.table.rowCount()):
        model.select(w.table.model().index(r, 0),
                     QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows)


def _click(box, role) -> None:
    (button,) = [b for b in box.buttons() if box.buttonRole(b) == role]
    button.click()


def test_disk_column_and_footer(qtbot, history, two_runs):
    from gpuscope.app.history.qt_history import COLUMNS

    _load(qtbot, history)
    assert history.table.rowCount() == 2
    for r in range(2):
        run_id = history.table.item(r, 0).text()
        assert history.table.item(r, COLUMNS.index("Disk")).text() == human(disk_usage(two_runs / "runs" / run_id))
    assert history.footer.text().startswith(f"Disk: {human(disk_usage(two_runs / 'runs'))} in run folders")
    SHOTS.mkdir(parents=True, exist_ok=True)
    history.grab().save(str(SHOTS / "history-disk-use.png"))


def test_delete_selected_runs_after_confirmation(qtbot, history, two_runs):
    from PySide6.QtWidgets import QMessageBox

    _load(qtbot, history)
    ids = [history.table.item(r, 0).text() for r in range(2)]
    _select_all(history)
    history.delete_button.click()
    box = history.confirm_box
    assert box is not None and box.text().startswith("Delete 2 run(s)")
    _click(box, QMessageBox.ButtonRole.RejectRole)
    assert history.status.text() == "nothing was deleted"
    assert all((two_runs / "runs" / i).is_dir() for i in ids)

    history.delete_button.click()
    with qtbot.waitSignal(history.sigLoaded, timeout=60_000):
        _click(history.confirm_box, QMessageBox.ButtonRole.DestructiveRole)
    assert history.table.rowCount() == 0
    assert history.status.text().startswith("deleted 2 run(s)")
    assert not any((two_runs / "runs" / i).exists() for i in ids)
    with closing(sqlite3.connect(store_of(two_runs))) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM sample_series").fetchone()[0] == 0


def test_rebuilt_store_is_said_in_the_status(qtbot, history, two_runs):
    damage_bytes(store_of(two_runs), 0, 4096)
    _load(qtbot, history)
    assert history.table.rowCount() == 2
    (copy,) = damaged_copies(two_runs)
    assert "was damaged" in history.status.text() and str(copy) in history.status.text()
