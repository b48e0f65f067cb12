"""The Report tab as a profiler should lay it out (issue 16, parts 2 and 3), on a real recording: a
fork Pool(2) recorded under nsys with fork tracing off, so nsys misses both workers and the timeline
draws their ranges from gpuscope's own records.

- Layout: the banner is compact (its head line; the findings on demand), the timeline gets the
  space (both worker lanes fit at 1280x800, the larger share at 800x500), the tables' height is the
  user's to drag and is remembered in the window's settings for the next view.
- Agreement: the NVTX table counts every range the timeline draws; the rows of gpuscope's records
  are marked "from gpuscope's record" and nsys's rows stay equal to ``nsys stats`` row by row, even
  for a name recorded by both (the main process also runs the workers' task once).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt

from gpuscope.app import workers
from gpuscope.app.report.qt_report_view import TABLES_KEY, QtReportView
from gpuscope.app.report.qt_summary import RECORD_TINT
from gpuscope.nsys import locate
from gpuscope.trace import timeline as T
from gpuscope.trace.summary import RECORD_MARK
from tests.app.timeline_support import nsys_available, nsys_run, nsys_stats_nvtx, save_shot
from tests.nsys_versions import NEWEST, VERSIONS

pytestmark = [pytest.mark.gui, pytest.mark.nsys,
              pytest.mark.skipif(not nsys_available() and os.environ.get("CI") != "true",
                                 reason="Nsight Systems not provisioned (scripts/provision_nsys.py)")]
LOAD_MS = 60_000

# The main process runs `work` once itself (nsys records it) and its two fork workers run it 8
# times (nsys, fork tracing off, records none of them; gpuscope's logs have them, each inside
# gpuscope's own task range `gpuscope:work`).
SCRIPT = r'''
import multiprocessing as mp
import time

import nvtx


@nvtx.annotate("work", color="green")
def work(i):
    end = time.perf_counter() + 0.01
    while time.perf_counter() < end:
        pass
    return i


if __name__ == "__main__":
    with nvtx.annotate("setup", color="blue"):
        pool = mp.get_context().Pool(2)
    print(sum(pool.map(work, range(8), chunksize=1)), flush=True)
    work(99)
    pool.close()
    pool.join()
'''
NSYS_SEES = {"setup": 1, "work": 1}                     # the main process's ranges
RECORDED = {"work": 8, "gpuscope:work": 8}              # the workers', from gpuscope's records


INSTALLS = locate.provisioned_installs()
_RECORDED: dict[str, dict] = {}


def _recorded(release: str, tmp_path_factory) -> dict:
    """The fork run recorded with that nsys release (once per module)."""
    if release not in _RECORDED:
        folder = tmp_path_factory.mktemp(f"forkrun-{release}")
        script = folder / "fork_pool.py"
        script.write_text(SCRIPT, encoding="utf-8")
        with pytest.MonkeyPatch.context() as mp:
            if release in INSTALLS:
                mp.setenv("GPUSCOPE_NSYS", str(INSTALLS[release].nsys))
            _RECORDED[release] = nsys_run(script, "--nsys-trace", "nvtx", "--nsys-fork", "off", method="fork",
                                          home=folder / "home")
    return _RECORDED[release]


@pytest.fixture(scope="module")
def fork_run(tmp_path_factory) -> dict:
    """The layout tests' recording: the newest release (tests/nsys_versions.py BEHAVIOUR)."""
    return _recorded(NEWEST, tmp_path_factory)


@pytest.fixture(scope="module", params=[v for v in VERSIONS if v in INSTALLS] or [NEWEST])
def any_fork_run(request, tmp_path_factory) -> dict:
    """The agreement with nsys stats is the reader's: the oldest and newest releases (VERSIONS)."""
    return _recorded(request.param, tmp_path_factory)


def _view(qtbot, settings: QSettings, size: tuple[int, int]) -> QtReportView:
    view = QtReportView(settings=settings)
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    return view


def _load(qtbot, view: QtReportView, run_dir: str):
    with qtbot.waitSignal(view.sigLoaded, timeout=LOAD_MS) as sig:
        view.show_run(run_dir)
    return sig.args[0]


def _rows(view: QtReportView) -> list[tuple[str, str, int]]:
    """(source, name, count) of each NVTX row, read back from the table the user sees."""
    table = view.summary.tables["nvtx"]
    counts = [int(c.replace(",", "")) for c in table.column_values("Count")]
    return list(zip(table.column_values("Source"), table.column_values("Name"), counts))


def test_tables_count_what_the_timeline_draws_and_mark_gpuscope_records(qtbot, any_fork_run, tmp_path):
    fork_run = any_fork_run
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    view = _view(qtbot, settings, (1280, 800))
    report = _load(qtbot, view, fork_run["run_dir"])
    missing = {p.pid for p in report.coverage.processes if p.status == "missing"}
    assert len(missing) == 2, report.coverage.to_dict()
    tl = view.timeline.timeline
    drawn_by = {T.SOURCE_NAMES[s]: int((tl.ranges.source == s).sum()) for s in (T.SOURCE_NSYS, T.SOURCE_GPUSCOPE)}
    assert set(tl.ranges.pid[tl.ranges.source == T.SOURCE_GPUSCOPE].tolist()) == missing

    rows = _rows(view)
    # every range the timeline draws is counted once, and the table says who recorded it
    assert sum(n for _, _, n in rows) == len(tl.ranges) == sum(drawn_by.values())
    assert {(name, n) for src, name, n in rows if src == RECORD_MARK} == set(RECORDED.items())
    assert sum(n for src, _, n in rows if src == RECORD_MARK) == drawn_by["gpuscope"]
    assert {(name, n) for src, name, n in rows if src == "nsys"} == set(NSYS_SEES.items())
    # nsys's rows are Nsight Systems' own numbers, even for `work`, which both recorded
    assert {name: n for src, name, n in rows if src == "nsys"} == \
        nsys_stats_nvtx(Path(fork_run["run_dir"]) / "report.nsys-rep")
    # marked rows are tinted; the line beside the filter says how many ranges and why
    table = view.summary.tables["nvtx"]
    tints = table.column_values("Name", Qt.BackgroundRole)
    assert [t == RECORD_TINT for t in tints] == [src == RECORD_MARK for src, _, _ in rows]
    assert table.note.isVisible()
    assert table.note.full.startswith(f"{drawn_by['gpuscope']:,} of {len(tl.ranges):,} ranges")
    assert "nsys did not record" in table.note.full
    # the banner says the same in its head line
    assert f"their {drawn_by['gpuscope']:,} ranges are drawn from gpuscope's own records" in view.banner.head.text()


def test_timeline_gets_the_space_and_the_tables_height_is_remembered(qtbot, fork_run, tmp_path):
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    view = _view(qtbot, settings, (1280, 800))
    _load(qtbot, view, fork_run["run_dir"])
    banner = view.banner
    line = banner.head.fontMetrics().height()
    # compact: the head line (at most two lines here), the findings only on demand
    assert banner.isVisible() and banner.folded and not banner.view.isVisible()
    assert banner.height() <= 2 * line + 20, banner.height()
    assert banner.apply_button.isVisible() and "fork tracing" in banner.apply_button.text()
    qtbot.mouseClick(banner.fold_button, Qt.LeftButton)
    assert banner.view.isVisible() and banner.view.findings == banner.findings
    assert not banner.apply_button.isVisible() and banner.view.apply_button.isVisible()   # one Apply at a time
    qtbot.mouseClick(banner.fold_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: banner.height() <= 2 * line + 20)
    assert banner.apply_button.isVisible()
    # 1280x800: every lane of the three processes fits (no vertical scrolling of lanes)
    lanes = {b.pid for b in view.timeline.layout_model.processes}
    assert len(lanes) == 3
    qtbot.waitUntil(lambda: view.timeline.height() >= view.timeline.content_height())
    assert view.grab().save(str(tmp_path / "report-fork-1280x800.png"))   # the window's picture below is the docs' one
    # 800x500 (with the banner): the timeline has the larger share
    view.resize(800, 500)
    qtbot.waitUntil(lambda: view.width() == 800)
    assert view.banner.isVisible()
    assert view.timeline.height() > view.tables_height() > 60, (view.timeline.height(), view.tables_height())
    assert view.grab().save(str(tmp_path / "report-fork-800x500.png"))

    # the user drags the tables lower: the height goes to the settings, and a new view uses it
    view.resize(1280, 800)
    qtbot.waitUntil(lambda: view.width() == 1280)
    before = view.tables_height()
    split = view._split
    split.moveSplitter(split.sizes()[0] + 100, 1)       # what dragging the handle 100 px down does
    dragged = view.tables_height()
    assert dragged == before - 100
    assert int(settings.value(TABLES_KEY)) == dragged
    view.resize(1280, 700)                               # a smaller window: the timeline gives way
    qtbot.waitUntil(lambda: view.height() == 700)
    assert view.tables_height() == dragged
    view.close()
    again = _view(qtbot, settings, (1280, 800))
    _load(qtbot, again, fork_run["run_dir"])
    assert again.tables_height() == dragged
    assert again.timeline.height() >= again.tables_height()
    assert workers.wait_all(30_000)


def test_main_window_report_tab_uses_the_window_settings(qtbot, fork_run, tmp_path):
    """The acceptance sizes in the window itself (the pictures in docs/APP.md), then a height kept in
    the window's own settings."""
    from apphelpers import make_window, wait_report

    window = make_window(qtbot)                          # 1280x800, settings from the test's file
    window.load_report(fork_run["run_dir"], switch=True)
    wait_report(qtbot, window)
    view = window.report_view
    assert view.settings() is window.settings
    tl = view.timeline.timeline
    assert sum(n for _, _, n in _rows(view)) == len(tl.ranges)
    assert np.any(tl.ranges.source == T.SOURCE_GPUSCOPE)
    qtbot.waitUntil(lambda: view.timeline.height() >= view.timeline.content_height())   # every lane fits
    assert view.banner.isVisible() and view.timeline.height() > view.tables_height()
    save_shot(window, "report-fork-window-1280x800.png", tmp_path)
    window.resize(800, 500)
    qtbot.waitUntil(lambda: window.width() == 800)
    assert view.banner.isVisible() and view.timeline.height() > view.tables_height() > 60
    save_shot(window, "report-fork-window-800x500.png", tmp_path)

    window.settings.setValue(TABLES_KEY, 222)            # as a drag in an earlier session left it
    window.resize(1280, 800)
    qtbot.waitUntil(lambda: view.tables_height() == 222)
    window.resize(800, 500)                              # a small window: it gives way to the timeline
    qtbot.waitUntil(lambda: window.width() == 800)
    assert view.timeline.height() >= view.tables_height() > 60
    assert int(window.settings.value(TABLES_KEY)) == 222     # kept for larger windows
