"""History: a start-method series is one entry that expands into its runs and reopens its
comparison (real store rows and run folders, Qt offscreen)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt

from gpuscope.spec import RunSpec
from tests.app.timeline_support import save_shot

pytestmark = pytest.mark.gui

SERIES = {"fork": ["20261201-000001-aaaaaaa1", "20261201-000003-aaaaaaa3"],
          "spawn": ["20261201-000002-aaaaaaa2", "20261201-000004-aaaaaaa4"]}
LONE = "20261201-000005-bbbbbbbb"


def _store_runs() -> None:
    from gpuscope import paths
    from gpuscope.store import db, runs

    conn = db.connect()
    try:
        for k, (method, run_id) in enumerate(sorted(((m, r) for m, ids in SERIES.items() for r in ids),
                                                    key=lambda x: x[1]) + [("spawn", LONE)]):
            folder = paths.runs_dir() / run_id
            (folder / "events").mkdir(parents=True)
            (folder / "stdout.log").write_bytes(b"x" * 1000)
            runs.insert_run(conn, run_id=run_id, spec={"script": "pool.py", "launcher": "python",
                                                       "start_method": method, "args": []},
                            run_dir=str(folder), versions={})
            runs.finish_run(conn, run_id, status="exited", ended_ns=time.time_ns() + k, exit_code=0, signal=None)
    finally:
        conn.close()


@pytest.fixture
def history(qtbot, gpuscope_home):
    from gpuscope.app import workers
    from gpuscope.app.history.qt_history import QtHistory
    from gpuscope.views.series_index import save_series

    _store_runs()
    save_series(SERIES, RunSpec(script="pool.py"), ["fork", "spawn"], 2)
    w = QtHistory()
    qtbot.addWidget(w)
    w.resize(1200, 300)
    w.show()
    with qtbot.waitSignal(w.sigLoaded, timeout=60_000):
        w.refresh()
    yield w
    workers.wait_all(15_000)


def _first_cells(w) -> list[str]:
    return [w.table.item(r, 0).text() for r in range(w.table.rowCount())]


def _click(qtbot, w, row: int, column: int, double: bool = False) -> None:
    rect = w.table.visualRect(w.table.model().index(row, column))
    click = qtbot.mouseDClick if double else qtbot.mouseClick
    click(w.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, rect.center())


def test_a_series_is_one_entry_that_expands_into_its_runs(qtbot, history, tmp_path):
    w = history
    first = _first_cells(w)
    assert len(first) == 2, first                       # the series and the lone run
    series_row = next(i for i, t in enumerate(first) if "series" in t)
    assert first[1 - series_row] == LONE
    assert first[series_row].startswith("▸ series S")
    assert w.table.item(series_row, 5).text() == "fork vs spawn, ×2"
    assert w.table.item(series_row, 7).text() == "4 runs"
    assert "compare series" in w.status.text()
    _click(qtbot, w, series_row, 0)                     # the ▸ cell expands it
    shown = _first_cells(w)
    assert shown[series_row].startswith("▾ series")
    runs = [t.strip() for t in shown[series_row + 1:series_row + 5]]
    assert runs == sorted(r for ids in SERIES.values() for r in ids)   # in the order they ran
    assert all(t.startswith("    ") for t in shown[series_row + 1:series_row + 5])
    save_shot(w, "history_series.png", tmp_path)
    _click(qtbot, w, series_row, 0)                     # and collapses again
    assert len(_first_cells(w)) == 2


def test_opening_a_series_reopens_its_comparison(qtbot, history):
    w = history
    series_row = next(i for i, t in enumerate(_first_cells(w)) if "series" in t)
    _click(qtbot, w, series_row, 2)
    assert w.open_button.text() == "Open comparison"
    assert len(w.selected_rows()) == 4                  # the line stands for its runs (Delete, Compare)
    with qtbot.waitSignal(w.sigCompare, timeout=5_000) as got:
        _click(qtbot, w, series_row, 2, double=True)
    assert sorted(got.args[0]) == sorted(r for ids in SERIES.values() for r in ids)
