"""The launch panel: the RunSpec it builds, the fork warning, settings kept between sessions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from apphelpers import make_window, script, wait_report

from gpuscope.views.launch_checks import fork_warning, gpu_features
from gpuscope.app.settings import open_settings
from gpuscope.errors import UserError
from gpuscope.fix import SetNsysForkTracing, SetStartMethod
from gpuscope.spec_checks import START_METHOD_HELP
from tests.app.timeline_support import save_shot

pytestmark = pytest.mark.gui


def test_spec_from_fields(qtbot, tmp_path):
    w = make_window(qtbot)
    p = w.panel
    p.set_script(script("pool_spawn.py"))
    p.args.setText("3 'two words'")
    p.cwd.setText(str(tmp_path))
    p.python.setText(sys.executable)
    p.method.setCurrentIndex(p.method.findData("forkserver"))
    p.launcher.setCurrentText("torchrun")
    assert p.nproc.isEnabled()
    p.nproc.setValue(3)
    p.annotate.setText("mod:f, pkg.mod:Class.*")
    p.nsys.setChecked(True)
    p.traces["cuda"].setChecked(False)
    p.fork.setCurrentIndex(p.fork.findData("on"))
    spec = p.spec()
    assert spec.args == ("3", "two words") and spec.cwd == str(tmp_path)
    assert spec.start_method == "forkserver" and spec.launcher == "torchrun" and spec.nproc == 3
    assert spec.annotate == ("mod:f", "pkg.mod:Class.*")
    assert spec.nsys.enabled and spec.nsys.trace == ("nvtx", "osrt") and spec.nsys.trace_fork is True
    assert p.method_help.text() == START_METHOD_HELP["forkserver"]
    p.annotate.setText("no_colon")
    with pytest.raises(UserError, match="MODULE:QUALNAME"):
        p.spec()


def test_fork_warning_for_cuda_or_nvtx_scripts(qtbot):
    assert gpu_features(script("uses_torch.py")) == ["CUDA"]
    assert gpu_features(script("pool_spawn.py")) == ["NVTX"]
    assert gpu_features(script("flood.py")) == []
    assert fork_warning(script("flood.py"), "fork") is None
    w = make_window(qtbot)
    p = w.panel
    p.set_script(script("uses_torch.py"))
    p.method.setCurrentIndex(p.method.findData("fork"))
    assert p.fork_warning.isVisible() and "CUDA" in p.fork_warning.text()
    p.method.setCurrentIndex(p.method.findData("spawn"))
    assert not p.fork_warning.isVisible()
    p.method.setCurrentIndex(p.method.findData("fork"))
    p.set_script(script("flood.py"))
    assert not p.fork_warning.isVisible()


def test_settings_remembered_between_sessions(qtbot, app_settings):
    w = make_window(qtbot)
    p = w.panel
    p.set_script(script("flood.py"))
    p.args.setText("10")
    p.method.setCurrentIndex(p.method.findData("spawn"))
    with qtbot.waitSignal(w.controller.sigEnded, timeout=60_000):
        p.run_button.click()      # a run puts the script on the recent list
    p.launcher.setCurrentText("torchrun")
    p.nproc.setValue(4)
    p.nsys.setChecked(True)
    w.resize(900, 600)
    w.close()
    assert app_settings.exists()
    from gpuscope.app.qt_main_window import MainWindow

    w2 = MainWindow()
    qtbot.addWidget(w2)
    q = w2.panel
    assert q.script.currentText() == script("flood.py")
    assert [q.script.itemText(i) for i in range(q.script.count())] == [script("flood.py")]
    assert q.args.text() == "10" and q.method.currentData() == "spawn"
    assert q.launcher.currentText() == "torchrun" and q.nproc.value() == 4 and q.nsys.isChecked()
    assert w2.size().height() == 600   # (the offscreen screen is 800 px wide: width is clamped)


def test_drop_a_script_on_the_panel(qtbot):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    w = make_window(qtbot)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(script("flood.py"))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    w.panel.dropEvent(event)
    assert w.panel.script.currentText() == script("flood.py")


def test_apply_a_report_fix_to_the_next_run(qtbot):
    w = make_window(qtbot)
    p = w.panel
    p.method.setCurrentIndex(p.method.findData("fork"))
    w.apply_fix(SetNsysForkTracing(True))              # the banner's first fix of a fork run
    assert p.nsys.isChecked() and p.fork.currentData() == "on" and p.method.currentData() == "fork"
    assert "nsys fork = on" in w.state_label.text() and w.tabs.currentIndex() == 0
    w.apply_fix(SetStartMethod("spawn"))
    assert p.method.currentData() == "spawn"
    w.apply_fix(None)                                  # a version pin: nothing to set
    assert "by hand" in w.state_label.text()


def test_module_run_from_the_panel(qtbot, gpuscope_home):
    """Run a module (python -m) from the panel: the spec carries it, the run has its roles."""
    w = make_window(qtbot)
    p = w.panel
    pkg_root = Path(__file__).resolve().parents[1] / "runs" / "scripts"
    p.set_module("modpkg.pooljob")
    assert not p.browse_script.isEnabled() and "python -m" in p.script.lineEdit().placeholderText()
    p.cwd.setText(str(pkg_root))
    p.args.setText("a")
    p.method.setCurrentIndex(p.method.findData("spawn"))
    spec = p.spec()
    assert spec.module == "modpkg.pooljob" and spec.script == "-m modpkg.pooljob" and spec.args == ("a",)
    with qtbot.waitSignal(w.controller.sigEnded, timeout=120_000) as ended:
        p.run_button.click()
    result = ended.args[0]
    assert result.status == "exited", result
    roles = sorted(r.role for r in result.processes if r.ranges)
    assert roles == ["main", "pool worker", "pool worker"], result.processes
    w.tick()
    assert "results 2 module modpkg.pooljob args ['a']" in w.console.plain_text()
    wait_report(qtbot, w)
    s = open_settings()                           # the kind is remembered between sessions
    p.save(s)
    q = type(p)()
    qtbot.addWidget(q)
    q.load(s)
    assert q.is_module and q.script.currentText() == "modpkg.pooljob"
    p.script.setCurrentText("")
    with pytest.raises(UserError, match="choose a module"):
        p.spec()


def test_run_button_visible_in_a_small_window(qtbot):
    """At 700×450 the fields scroll, but Run and Stop stay pinned below them, wholly visible."""
    w = make_window(qtbot)
    w.resize(700, 450)
    qtbot.waitUntil(lambda: w.height() <= 460)
    p = w.panel
    qtbot.waitUntil(lambda: p.fields_scroll.verticalScrollBar().maximum() > 0)   # the fields do not fit: they scroll
    for button in (p.run_button, p.stop_button):
        assert button.isVisible()
        visible = button.visibleRegion().boundingRect()
        assert visible == button.rect(), (button.text(), visible, button.rect())   # not clipped by a viewport
        top_left = button.mapTo(w, button.rect().topLeft())
        assert w.rect().contains(top_left) and w.rect().contains(button.mapTo(w, button.rect().bottomRight()))
    bar = p.fields_scroll.verticalScrollBar()
    bar.setValue(bar.maximum())                                         # scrolling leaves them
    assert p.run_button.visibleRegion().boundingRect() == p.run_button.rect()


def test_recent_scripts_elide_left_and_remember_their_arguments(qtbot, app_settings):
    """Recent scripts keep their file name visible (elided at the start, full path in the tooltip);
    picking one brings back the arguments it last ran with, also in a later session."""
    from PySide6.QtCore import Qt

    w = make_window(qtbot)
    p = w.panel
    assert p.script.view().textElideMode() == Qt.TextElideMode.ElideLeft
    for name, args in (("flood.py", "10"), ("pool_spawn.py", "1 'two words'")):
        p.set_script(script(name))
        p.args.setText(args)
        p.save(w.settings, ran=True)           # what pressing Run does first
    assert p.script.itemData(0, Qt.ItemDataRole.ToolTipRole) == script("pool_spawn.py")
    assert p.script.toolTip() == script("pool_spawn.py")
    flood = p.script.findText(script("flood.py"))
    p.script.setCurrentIndex(flood)
    p.script.activated.emit(flood)            # the user picks it from the list
    assert p.args.text() == "10"
    p.args.setText("typed, not run")
    w.close()
    from gpuscope.app.qt_main_window import MainWindow

    w2 = MainWindow()
    qtbot.addWidget(w2)
    q = w2.panel
    i = q.script.findText(script("pool_spawn.py"))
    q.script.setCurrentIndex(i)
    q.script.activated.emit(i)
    assert q.args.text() == "1 'two words'"
    i = q.script.findText(script("flood.py"))
    q.script.setCurrentIndex(i)
    q.script.activated.emit(i)
    assert q.args.text() == "10"               # what it ran with, not what was typed later


def test_a_forkserver_preload_fix_fills_the_preload_field(qtbot, tmp_path):
    from gpuscope.fix import SetForkserverPreload

    w = make_window(qtbot)
    p = w.panel
    p.set_script(script("pool_spawn.py"))
    p.method.setCurrentIndex(p.method.findData("spawn"))
    assert not p.preload.isVisibleTo(p)                  # the field is the forkserver's only
    w.apply_fix(SetForkserverPreload(("numpy", "json")))
    assert p.method.currentData() == "forkserver" and p.preload.isVisibleTo(p)
    assert p.preload.text() == "numpy, json" and "forkserver preload = numpy,json" in w.state_label.text()
    spec = p.spec()
    assert spec.start_method == "forkserver" and spec.forkserver_preload == ("numpy", "json")
    save_shot(p, "launch-forkserver-preload.png", tmp_path)
    p.method.setCurrentIndex(p.method.findData("spawn"))
    assert p.spec().forkserver_preload == ()             # not carried under another method
    p.set_spec(spec)                                     # History's "Run again" gives it back
    assert p.spec() == spec
