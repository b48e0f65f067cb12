"""The app's end-of-run banner for --annotate: what each pattern matched, and a pattern that
matched nothing as a warning with the closest name (the same lines as the CLI's notes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from apphelpers import make_window, wait_report
from PySide6.QtCore import Qt

from tests.app.timeline_support import save_shot

pytestmark = pytest.mark.gui

SCRIPT = Path(__file__).resolve().parents[1] / "runs" / "scripts" / "annotate_plain.py"


def test_annotate_results_in_a_banner_after_the_run(qtbot, tmp_path, gpuscope_home):
    w = make_window(qtbot)
    p = w.panel
    p.set_script(str(SCRIPT))
    p.method.setCurrentIndex(p.method.findData("spawn"))
    p.annotate.setText("json:dumps, json:dumbs")
    assert not w.live.notes.isVisible()
    with qtbot.waitSignal(w.controller.sigStarted, timeout=30_000):
        qtbot.mouseClick(p.run_button, Qt.MouseButton.LeftButton)
    wait_report(qtbot, w, timeout=60_000)
    assert w.last_result.status == "exited"
    banner = w.live.notes
    assert banner.isVisible() and banner.warning
    # the banner says what the CLI says: one line per pattern, from the run's own notes
    assert banner.lines == [n for n in w.last_result.notes if "--annotate" in n]
    text = banner.text.text()
    assert "--annotate json:dumps: 1 function (dumps), 4 calls recorded in 1 process" in text, text
    assert "--annotate json:dumbs matched nothing; did you mean json:dumps or json:dump?" in text, text
    save_shot(w, "annotate-banner.png", tmp_path)
    # a new run starts without the last run's banner
    w.live.reset("next")
    assert not banner.isVisible() and banner.lines == []
